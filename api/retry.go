package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

// When work goes wrong (DESIGN.md §3): a submission's failed chunks, retrying them (one
// submission, or many by filter), and pausing and resuming a submission.

// Bounds of the failures page.
const (
	// FailuresLimitDefault is the page size of GET /v1/submissions/{id}/failures without
	// ?limit=.
	FailuresLimitDefault = 100
)

func (s *server) failures(c echo.Context) error {
	id, err := parseID(c.Param("id"), "id")
	if err != nil {
		return err
	}
	limit := FailuresLimitDefault
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > queuer.FailuresPageMax {
			return badRequest("limit: must be an integer between 1 and %d", queuer.FailuresPageMax)
		}
		limit = n
	}
	after := int64(-1)
	if v := c.QueryParam("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return badRequest("after: must be a chunk index (an integer, 0 or more), the next_after of the previous page")
		}
		after = n
	}
	if err := s.checkTenant(c, id); err != nil {
		return err
	}
	// The page is cut at MaxFailuresPageBytes; what it holds while it is read and written
	// (the rows, the answer's values made of them, the answer) is counted first.
	if err := holdOf(c).growTo(c.Request().Context(), listPageFactor*MaxFailuresPageBytes); err != nil {
		return err
	}
	list, more, err := s.q.Failures(c.Request().Context(), id, after, limit)
	if err != nil {
		return err
	}
	page := wire.Failures{Failures: make([]wire.FailedChunk, 0, len(list))}
	for _, f := range list {
		page.Failures = append(page.Failures, toFailedChunk(f))
	}
	if more && len(list) > 0 {
		next := list[len(list)-1].ChunkIndex
		page.NextAfter = &next
	}
	return c.JSON(http.StatusOK, page)
}

// toFailedChunk is a failed chunk as the wire has it: Error is its last error.
func toFailedChunk(f queuer.FailedChunk) wire.FailedChunk {
	out := wire.FailedChunk{ChunkIndex: f.ChunkIndex, State: f.State, Retries: f.Retries, Errors: make([]wire.AttemptError, len(f.Errors))}
	for i, e := range f.Errors {
		out.Errors[i] = wire.AttemptError{Error: e.Error, Consumer: e.Consumer, At: e.At.UTC()}
	}
	if len(f.Errors) > 0 {
		out.Error = f.Errors[0].Error
	}
	return out
}

// retryBody is what POST /v1/submissions/{id}/retry and POST /v1/submissions/retry share.
type retryBody struct {
	Chunks     *string `json:"chunks"`
	MaxRetries *int    `json:"max_retries"`
}

// options checks the body and returns the engine's options.
func (b retryBody) options() (queuer.RetryOptions, error) {
	var opts queuer.RetryOptions
	if b.Chunks != nil {
		switch *b.Chunks {
		case wire.RetryFailed:
		case wire.RetryUnfinished:
			opts.Unfinished = true
		default:
			return opts, badRequest("chunks: must be %q (the failed chunks, the default) or %q (the skipped ones too), not %q",
				wire.RetryFailed, wire.RetryUnfinished, abbreviate([]byte(*b.Chunks)))
		}
	}
	if b.MaxRetries != nil {
		if *b.MaxRetries < 0 || *b.MaxRetries > maxRetriesLimit {
			return opts, badRequest("max_retries: must be an integer between 0 and %d", maxRetriesLimit)
		}
		opts.MaxRetries = b.MaxRetries
	}
	return opts, nil
}

func (s *server) retry(c echo.Context) error {
	id, err := parseID(c.Param("id"), "id")
	if err != nil {
		return err
	}
	// retryBody's fields, and the selection of chunks (one submission's retry only); not
	// embedded, so that a decoding error names the field as the client wrote it.
	var body struct {
		Chunks       *string         `json:"chunks"`
		MaxRetries   *int            `json:"max_retries"`
		ChunkIndexes json.RawMessage `json:"chunk_indexes"`
	}
	if err := s.decodeBody(c, &body); err != nil {
		return err
	}
	opts, err := retryBody{Chunks: body.Chunks, MaxRetries: body.MaxRetries}.options()
	if err != nil {
		return err
	}
	if len(body.ChunkIndexes) > 0 && !isNull(body.ChunkIndexes) {
		if opts.ChunkIndexes, err = parseChunkIndexes(body.ChunkIndexes); err != nil {
			return err
		}
		if body.Chunks != nil {
			return badRequest("chunks: give either chunks or chunk_indexes, not both (chunk_indexes retries the chunks it names, failed or skipped)")
		}
	}
	if err := s.checkTenant(c, id); err != nil {
		return err
	}
	if opts.ChunkIndexes != nil {
		st, err := s.q.Status(c.Request().Context(), id)
		if err != nil {
			return err
		}
		for i, idx := range opts.ChunkIndexes {
			if int64(idx) >= st.ChunksTotal {
				return badRequest("chunk_indexes[%d]: %d is past the submission's last chunk (it has %d, from 0)", i, idx, st.ChunksTotal)
			}
		}
	}
	st, err := s.q.Retry(c.Request().Context(), id, opts)
	if errors.Is(err, queuer.ErrNothingToRetry) && opts.ChunkIndexes != nil {
		return &Error{Status: http.StatusConflict, Code: "nothing_to_retry",
			Message: "none of the chunks chunk_indexes names has failed or was skipped: nothing to retry (GET …/failures lists the failed ones)"}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toStatus(st))
}

// parseChunkIndexes reads a retry's chunk_indexes: 1 to queuer.RetryChunksMax chunk
// indexes (integers, 0 or more); a bad one is a 400 naming it.
func parseChunkIndexes(raw json.RawMessage) ([]int32, error) {
	notArray := badRequest("chunk_indexes: must be an array of chunk indexes (integers, 0 or more), not %s", abbreviate(raw))
	// Read one item at a time, so that an array past the bound is refused after
	// RetryChunksMax+1 items, never held whole.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, notArray
	}
	var out []int32
	for i := 0; dec.More(); i++ {
		if i == queuer.RetryChunksMax {
			return nil, badRequest("chunk_indexes: more than %d chunks; at most %d in one retry", queuer.RetryChunksMax, queuer.RetryChunksMax)
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, notArray
		}
		num, ok := tok.(json.Number)
		n, perr := strconv.ParseInt(string(num), 10, 32)
		if !ok || perr != nil || n < 0 {
			what := fmt.Sprint(tok)
			if d, isDelim := tok.(json.Delim); isDelim {
				what = string(d) + "…"
			}
			return nil, badRequest("chunk_indexes[%d]: must be a chunk index (an integer, 0 or more), not %s", i, abbreviate([]byte(what)))
		}
		out = append(out, int32(n))
	}
	if len(out) == 0 {
		return nil, badRequest("chunk_indexes: must name at least one chunk (leave it out to retry every failed chunk)")
	}
	return out, nil
}

func (s *server) retryMany(c echo.Context) error {
	var body struct {
		retryBody
		State  *string         `json:"state"`
		Key    *string         `json:"key"`
		Value  json.RawMessage `json:"value"`
		Limit  *int            `json:"limit"`
		Tenant *string         `json:"tenant"`
	}
	if err := s.decodeBody(c, &body); err != nil {
		return err
	}
	opts, err := body.options()
	if err != nil {
		return err
	}
	sel := queuer.ListOptions{State: wire.StateFailed, Limit: wire.ListLimitDefault}
	if body.State != nil {
		sel.State = wire.State(*body.State)
		if !slices.Contains(wire.States(), sel.State) {
			return badRequest("state: must be one of in_progress, completed, failed, cancelled")
		}
	}
	hasValue := len(body.Value) > 0 && !isNull(body.Value)
	switch {
	case body.Key != nil && !hasValue:
		return badRequest("value: required with key")
	case body.Key == nil && hasValue:
		return badRequest("key: required with value")
	case body.Key != nil:
		if *body.Key == "" || strings.ContainsRune(*body.Key, 0) || !utf8.ValidString(*body.Key) {
			return badRequest("key: must be 1 or more bytes of UTF-8 text without NUL characters")
		}
		var v wire.MetadataValue
		if err := json.Unmarshal(body.Value, &v); err != nil {
			return badRequest("value: must be an integer (int64) or a string, not %s", abbreviate(body.Value))
		}
		if v.IsString() {
			if err := checkText("value", body.Value, v.Str(), MaxStrategicValueBytes); err != nil {
				return err
			}
		}
		canonical, _ := v.MarshalJSON()
		sel.Key, sel.Value = *body.Key, canonical
	}
	if body.Limit != nil {
		if *body.Limit < 1 || *body.Limit > queuer.RetryManyMax {
			return badRequest("limit: must be an integer between 1 and %d", queuer.RetryManyMax)
		}
		sel.Limit = *body.Limit
	}
	named := ""
	if body.Tenant != nil {
		named = *body.Tenant
	}
	if sel.Tenant, err = listTenant(c, named); err != nil {
		return err
	}
	ids, err := s.q.RetryMany(c.Request().Context(), sel, opts)
	var quota *queuer.QuotaError
	if errors.As(err, &quota) && len(ids) > 0 {
		// Those before the refusal are retried: the answer says so.
		e := toError(err, c)
		e.Message += fmt.Sprintf("; the %d submissions before it were retried (the newest first), the rest were not", len(ids))
		return e
	}
	if err != nil {
		return err
	}
	out := wire.Retried{Retried: make([]string, len(ids))}
	for i, id := range ids {
		out.Retried[i] = strconv.FormatInt(id, 10)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *server) pause(c echo.Context) error {
	return s.pauseOrResume(c, (*queuer.Queuer).Pause)
}

func (s *server) resume(c echo.Context) error {
	return s.pauseOrResume(c, (*queuer.Queuer).Resume)
}

func (s *server) pauseOrResume(c echo.Context, do func(*queuer.Queuer, context.Context, int64) (queuer.Status, error)) error {
	id, err := parseID(c.Param("id"), "id")
	if err != nil {
		return err
	}
	if err := s.checkTenant(c, id); err != nil {
		return err
	}
	st, err := do(s.q, c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toStatus(st))
}
