package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

// Error is an answer other than success: a status and the body
// {"error": {"code": …, "message": …}}. Handlers return it; the error handler writes it.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, when positive, is sent as the Retry-After header (in whole seconds).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf(format, args...)}
}

// errorHandler writes every error, echo's own (unknown route, wrong method) included, in
// the one error shape, and maps the queuer's sentinel errors to their status codes.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		e := toError(err, c)
		e.log(c.Request().Context(), log, c.Request().Method, c.Request().URL.Path, err)
		if ra := e.retryAfterHeader(); ra != "" {
			c.Response().Header().Set("Retry-After", ra)
		}
		if werr := c.JSON(e.Status, e.body()); werr != nil {
			log.DebugContext(c.Request().Context(), "writing error answer", slog.Any("error", werr))
		}
	}
}

// log logs err, the cause of e, when e is a fault of this instance (a 5xx other than 503).
func (e *Error) log(ctx context.Context, log *slog.Logger, method, path string, err error) {
	if e.Status >= 500 && e.Status != http.StatusServiceUnavailable {
		log.ErrorContext(ctx, "request failed", slog.String("method", method), slog.String("path", path), slog.Any("error", err))
	}
}

// retryAfterHeader is e's Retry-After header, in whole seconds; "" when it has none.
func (e *Error) retryAfterHeader() string {
	if e.RetryAfter <= 0 {
		return ""
	}
	return strconv.Itoa(int(max(e.RetryAfter.Round(time.Second), time.Second) / time.Second))
}

// body is e's answer body, the one error shape.
func (e *Error) body() wire.ErrorBody {
	return wire.ErrorBody{Error: wire.ErrorDetail{Code: e.Code, Message: e.Message}}
}

// QuotaRetryAfter is the Retry-After of a 429 quota_exceeded: a tenant's work drains in
// its own time, so a client should not hammer.
const QuotaRetryAfter = 10 * time.Second

// toError maps err to its answer. c may be nil (an answer written outside echo, park.go).
func toError(err error, c echo.Context) *Error {
	var e *Error
	var he *echo.HTTPError
	var maxBytes *http.MaxBytesError
	var quota *queuer.QuotaError
	var busyMove *queuer.MoveBusyError
	var parent *queuer.ParentError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &parent):
		return badRequest("%s", parent.Error())
	case errors.As(err, &maxBytes):
		return tooLarge("request body is over the %d-byte limit (OPSQ_MAX_BODY); send large submissions as NDJSON (Content-Type: application/x-ndjson), which has no total limit", maxBytes.Limit)
	case errors.Is(err, queuer.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "id: no such submission (it may have been deleted after the retention period)"}
	case errors.Is(err, queuer.ErrFinished):
		return &Error{Status: http.StatusConflict, Code: "already_finished", Message: "the submission is already finished (completed, failed or cancelled)"}
	case errors.Is(err, queuer.ErrNothingToRetry):
		return &Error{Status: http.StatusConflict, Code: "nothing_to_retry", Message: "the submission has no failed chunk to retry (with \"chunks\": \"unfinished\", nor skipped one); a cancelled submission retries only with \"chunks\": \"unfinished\""}
	case errors.Is(err, queuer.ErrRetriedWhileCancelled):
		return &Error{Status: http.StatusConflict, Code: "retried", Message: "a retry made the submission in progress again before its cancel had moved all its chunks: the retry won, and the submission is in progress; cancel it again to cancel it"}
	case errors.Is(err, queuer.ErrNotCompleted):
		return &Error{Status: http.StatusConflict, Code: "not_completed", Message: "results exist only for completed submissions; wait with GET /v1/submissions/{id}?wait=60s"}
	case errors.Is(err, queuer.ErrTooManyWaitersForKey):
		return &Error{Status: http.StatusServiceUnavailable, Code: "too_many_waiters", RetryAfter: time.Second,
			Message: "this API key holds its share of the requests waiting on this instance (OPSQ_MAX_WAITERS_PER_KEY); retry later"}
	case errors.As(err, &quota):
		return &Error{Status: http.StatusTooManyRequests, Code: "quota_exceeded", RetryAfter: QuotaRetryAfter,
			Message: quota.Error() + " (opsq tenants set changes the quotas)"}
	case errors.As(err, &busyMove):
		return &Error{Status: http.StatusTooManyRequests, Code: "too_many_moves", RetryAfter: busyMove.RetryAfter, Message: busyMove.Error()}
	case errors.Is(err, queuer.ErrTooManyWaiters):
		return &Error{Status: http.StatusServiceUnavailable, Code: "too_many_waiters", RetryAfter: time.Second,
			Message: "too many requests wait on this instance (OPSQ_MAX_WAITERS); retry later or elsewhere"}
	case errors.Is(err, queuer.ErrReserveTimeout):
		return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: RetryAfterDefault,
			Message: "reading the candidates of this reserve took longer than its bound: the database is slow or the strategy reads far (a select_only of a rare value under weighted_fair, for one); retry later"}
	case errors.Is(err, context.Canceled):
		return &Error{Status: 499, Code: "client_closed_request", Message: "the client went away"}
	case queuer.IsUnavailable(err):
		return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: RetryAfterDefault,
			Message: "the database cannot be reached right now; retry later"}
	case c != nil && errors.As(err, &he):
		switch he.Code {
		case http.StatusNotFound:
			// Not "not_found", which says that an id is unknown: a client that reads it
			// would have the user check an id when the URL is wrong.
			return &Error{Status: he.Code, Code: "unknown_route", Message: fmt.Sprintf("no route %s %s: check the URL (GET /v1/openapi.json lists the routes)", requestMethod(c), c.Request().URL.Path)}
		case http.StatusMethodNotAllowed:
			return &Error{Status: he.Code, Code: "method_not_allowed", Message: fmt.Sprintf("%s is not allowed on %s", requestMethod(c), c.Request().URL.Path)}
		case http.StatusRequestEntityTooLarge:
			return tooLarge("request body too large")
		}
		return &Error{Status: he.Code, Code: statusCode(he.Code), Message: fmt.Sprint(he.Message)}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the server log has the details"}
}

// statusCode is the code of an error of echo's that no case above names: one of the
// document's codes (ErrorCode in openapi.yaml, which clients may switch on), by status.
func statusCode(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusForbidden:
		return "forbidden"
	case status == http.StatusRequestTimeout:
		return "request_timeout"
	case status == http.StatusServiceUnavailable:
		return "unavailable"
	case status >= 500:
		return "internal"
	}
	return "bad_request"
}
