package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"opsq/api/apikeys"
	"opsq/api/wire"
	"opsq/queuer"
	"opsq/strategy"
)

func (s *server) reserve(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	forwarded, err := s.forwarded(c, body)
	if err != nil {
		return err
	}
	req, err := s.parseReserve(body)
	if err != nil {
		return err
	}
	req.Forwarded = forwarded
	req.Tenants, _ = confined(c)
	ctx := c.Request().Context()
	chunks, parked, err := s.q.ReserveOrPark(ctx, req)
	if parked != nil {
		if s.park(c, parked) {
			return nil // answered on the connection when the wait is over (park.go)
		}
		chunks, err = parked.Wait(ctx)
	}
	if err != nil {
		return err
	}
	if len(chunks) > 0 && s.cfg.beforeAnswer != nil {
		s.cfg.beforeAnswer(c.Request(), nil)
	}
	if len(chunks) > 0 && clientLeft(c.Request()) {
		// Nobody will read the answer: free the chunks now, not when their lease runs out.
		s.q.GiveBack(ctx, chunks)
		return nil
	}
	holdOf(c).forceTo(answerBytes(chunks))
	return c.JSONBlob(http.StatusOK, appendReserved(nil, reservedAnswer(chunks)))
}

// giveBack serves another instance giving back chunks of this instance's shards that a
// reserve it forwarded here took but could not deliver, its consumer gone before the
// answer was written (queuer.GiveBackPath). Instances only: a request with a key is refused.
func (s *server) giveBack(c echo.Context) error {
	raw, err := s.readBody(c)
	if err != nil {
		return err
	}
	forwarded, err := s.forwarded(c, raw)
	if err != nil {
		return err
	}
	if !forwarded {
		who := "a request"
		if k, ok := c.Get(callerKey).(apikeys.Caller); ok {
			who = fmt.Sprintf("the key %q has the role %s, and", k.Name, k.Role)
		}
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="opsq", error="insufficient_scope"`)
		return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: fmt.Sprintf(
			"%s may not call POST %s: only the instances of the cluster call it, signed with the cluster key", who, queuer.GiveBackPath)}
	}
	var body struct {
		Tokens []string `json:"tokens"`
	}
	if err := decodeJSON(raw, &body); err != nil {
		return err
	}
	if len(body.Tokens) > wire.MaxRequestItems {
		return badRequest("tokens: at most %d per request", wire.MaxRequestItems)
	}
	s.q.GiveBackTokens(body.Tokens)
	return c.NoContent(http.StatusNoContent)
}

// answerBytes is about what a reserve answer holds while it is written: the chunks'
// inputs, their copies in the answer, the encoded answer, and each chunk's metadata as it
// is encoded. A reserve counts it once its chunks are taken, without waiting (they are
// held already; refusing them would cost each an attempt): the requests after it wait.
func answerBytes(chunks []queuer.Chunk) int64 {
	var n int64
	for _, ch := range chunks {
		n += 256 + 3*int64(len(ch.Input)) + int64(len(ch.Metadata)+len(ch.StrategicMetadata))
		if ch.Prefix != nil {
			n += int64(len(*ch.Prefix))
		}
	}
	return n
}

// reservedAnswer is the body of a reserve's answer.
func reservedAnswer(chunks []queuer.Chunk) wire.Reserved {
	out := wire.Reserved{Chunks: make([]wire.ReservedChunk, len(chunks))}
	for i, ch := range chunks {
		rc := wire.ReservedChunk{
			Token: ch.Token, SubmissionID: strconv.FormatInt(ch.SubmissionID, 10), ChunkIndex: int64(ch.ChunkIndex),
			Prefix: ch.Prefix, Metadata: ch.Metadata, Retries: int64(ch.Retries), ExpiresAt: ch.ExpiresAt.UTC(),
			StrategicMetadata: ch.StrategicValues, // decoded once per submission, shared
			Traceparent:       ch.Traceparent,
		}
		if rc.StrategicMetadata == nil {
			rc.StrategicMetadata = map[string]wire.MetadataValue{}
			_ = json.Unmarshal(ch.StrategicMetadata, &rc.StrategicMetadata) // validated on the way in
		}
		if ch.Prefix == nil {
			in := string(ch.Input)
			rc.Input = &in
		}
		out.Chunks[i] = rc
	}
	return out
}

// parseReserve validates the body of a reserve and returns the request (Forwarded unset).
func (s *server) parseReserve(raw []byte) (queuer.ReserveRequest, error) {
	var body struct {
		Max      *int            `json:"max"`
		Strategy json.RawMessage `json:"strategy"`
		Lease    *string         `json:"lease"`
		Wait     *string         `json:"wait"`
		Consumer json.RawMessage `json:"consumer"`
	}
	if err := decodeJSON(raw, &body); err != nil {
		return queuer.ReserveRequest{}, err
	}
	consumer, err := decodeText("consumer", body.Consumer, MaxConsumerBytes)
	if err != nil {
		return queuer.ReserveRequest{}, err
	}
	req := queuer.ReserveRequest{Max: 1, Lease: s.leaseDefault(), Consumer: consumer, MaxBytes: s.cfg.MaxReserveBytes}
	if body.Max != nil {
		if *body.Max < 1 || *body.Max > wire.MaxReserveChunks {
			return req, badRequest("max: must be between 1 and %d", wire.MaxReserveChunks)
		}
		req.Max = *body.Max
	}
	if req.Strategy, err = strategy.Parse(body.Strategy, "strategy"); err != nil {
		return req, badRequest("%s", err)
	}
	if body.Lease != nil {
		if req.Lease, err = parseDuration(*body.Lease, "lease", wire.MinLease, s.maxLease()); err != nil {
			return req, err
		}
	}
	if body.Wait != nil {
		if req.Wait, err = parseDuration(*body.Wait, "wait", 0, wire.MaxWait); err != nil {
			return req, err
		}
	}
	return req, nil
}

// completionIn and failureIn are the items of a complete's and a fail's body.
type (
	completionIn struct {
		Token  *string         `json:"token"`
		Output json.RawMessage `json:"output"`
	}
	failureIn struct {
		Token      *string         `json:"token"`
		Error      json.RawMessage `json:"error"`
		Retry      *bool           `json:"retry"`
		RetryAfter json.RawMessage `json:"retry_after"`
	}
)

// completeBody is a complete's body (complete_fast.go reads it).
type completeBody struct {
	Completions []completionIn `json:"completions"`
}

func (s *server) complete(c echo.Context) error {
	var body completeBody
	return recordOutcomes(s, c, "completions", &body, &body.Completions,
		func(it completionIn) (queuer.Completion, error) {
			output, err := decodeContent("output", it.Output)
			return queuer.Completion{Token: *it.Token, Output: []byte(output)}, err
		},
		func(it queuer.Completion) string { return it.Token }, s.q.Complete)
}

func (s *server) fail(c echo.Context) error {
	var body struct {
		Failures []failureIn `json:"failures"`
	}
	return recordOutcomes(s, c, "failures", &body, &body.Failures,
		func(it failureIn) (queuer.Failure, error) {
			msg, err := decodeText("error", it.Error, 0)
			if err != nil {
				return queuer.Failure{}, err
			}
			after, err := parseRetryAfter("retry_after", it.RetryAfter)
			return queuer.Failure{Token: *it.Token, Error: cutError(msg), Retry: it.Retry == nil || *it.Retry, RetryAfter: after}, err
		},
		func(it queuer.Failure) string { return it.Token }, s.q.Fail)
}

// recordOutcomes is the body of complete and fail: it decodes body, whose list of items
// is named field, checks each item's token and makes it the engine's item with toItem
// (whose 400s name the item's own fields; the item's path, "failures[3].", is put before
// them here, so that an item costs no field name unless it is refused), records the items
// whose tokens the caller may act on with do, and answers each token's status in request
// order.
func recordOutcomes[In interface{ token() *string }, T any](s *server, c echo.Context, field string, body any, list *[]In,
	toItem func(in In) (T, error), tokenOf func(T) string,
	do func(context.Context, []T) ([]wire.TokenStatus, error)) error {
	raw, err := s.readBody(c)
	if err != nil {
		return err
	}
	if f, ok := body.(interface{ decodeFast([]byte) bool }); !ok || !f.decodeFast(raw) {
		if err := decodeJSON(raw, body); err != nil {
			return err
		}
	}
	if len(*list) > wire.MaxRequestItems {
		return badRequest("%s: at most %d per request", field, wire.MaxRequestItems)
	}
	items := make([]T, len(*list))
	for i, in := range *list {
		if in.token() == nil {
			return badRequest("%s[%d].token: required", field, i)
		}
		item, err := toItem(in)
		if e, ok := err.(*Error); ok {
			e.Message = fmt.Sprintf("%s[%d].%s", field, i, e.Message)
			return e
		} else if err != nil {
			return err
		}
		items[i] = item
	}
	status, err := confineTokens(s, c, items, tokenOf, do)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, appendTokenResults(nil, tokenResults(len(items), func(i int) string { return tokenOf(items[i]) }, status)))
}

func (in completionIn) token() *string { return in.Token }
func (in failureIn) token() *string    { return in.Token }

// confineTokens runs do on the items whose tokens the caller may act on, and answers
// "unknown" for the others (DESIGN.md §8): the tokens of chunks of tenants a consumer key
// is not limited to. A caller who may act on every tenant costs nothing more.
func confineTokens[T, R any](s *server, c echo.Context, items []T, token func(T) string, do func(context.Context, []T) ([]R, error)) ([]R, error) {
	ctx := c.Request().Context()
	tenants, ok := confined(c)
	if !ok || len(items) == 0 {
		return do(ctx, items)
	}
	toks := make([]string, len(items))
	for i, it := range items {
		toks[i] = token(it)
	}
	outside, err := s.q.OutsideTenants(ctx, toks, tenants)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(outside, true) {
		return do(ctx, items)
	}
	var kept []T
	for i, it := range items {
		if !outside[i] {
			kept = append(kept, it)
		}
	}
	var got []R
	if len(kept) > 0 {
		if got, err = do(ctx, kept); err != nil {
			return nil, err
		}
	}
	out := make([]R, len(items))
	for i := range items {
		if outside[i] {
			out[i] = unknownResult[R]()
			continue
		}
		out[i], got = got[0], got[1:]
	}
	return out, nil
}

// unknownResult is the answer for a token the caller may not act on: the answer for a
// token nobody issued.
func unknownResult[R any]() R {
	var r R
	switch p := any(&r).(type) {
	case *wire.TokenStatus:
		*p = wire.StatusUnknown
	case *queuer.Extended:
		p.Status = wire.StatusUnknown
	}
	return r
}

// tokenResults pairs the tokens of a request with their statuses, in request order.
func tokenResults(n int, token func(i int) string, status []wire.TokenStatus) wire.TokenResults {
	out := wire.TokenResults{Results: make([]wire.TokenResult, n)}
	for i, st := range status {
		out.Results[i] = wire.TokenResult{Token: token(i), Status: st}
	}
	return out
}

func (s *server) extend(c echo.Context) error {
	var body struct {
		Tokens []string `json:"tokens"`
		Lease  *string  `json:"lease"`
	}
	raw, err := s.readBody(c)
	if err != nil {
		return err
	}
	forwarded, err := s.forwarded(c, raw)
	if err != nil {
		return err
	}
	if err := decodeJSON(raw, &body); err != nil {
		return err
	}
	if len(body.Tokens) > wire.MaxRequestItems {
		return badRequest("tokens: at most %d per request", wire.MaxRequestItems)
	}
	lease := s.leaseDefault()
	if body.Lease != nil {
		var err error
		if lease, err = parseDuration(*body.Lease, "lease", wire.MinLease, s.maxLease()); err != nil {
			return err
		}
	}
	results, err := confineTokens(s, c, body.Tokens, func(t string) string { return t },
		func(ctx context.Context, toks []string) ([]queuer.Extended, error) {
			return s.q.Extend(ctx, toks, lease, forwarded)
		})
	if err != nil {
		return err
	}
	out := wire.TokenResults{Results: make([]wire.TokenResult, len(results))}
	for i, r := range results {
		out.Results[i] = wire.TokenResult{Token: body.Tokens[i], Status: r.Status}
		if r.ExpiresAt != nil {
			t := r.ExpiresAt.UTC()
			out.Results[i].ExpiresAt = &t
		}
	}
	return c.JSON(http.StatusOK, out)
}

// decodeBody decodes a JSON object body of at most MaxBody bytes into v, refusing unknown
// fields; an empty body is an empty object.
func (s *server) decodeBody(c echo.Context, v any) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// forwarded reports whether c is a request another instance of the cluster forwarded
// here: marked with wire.ForwardedHeader and signed with the cluster key
// (queuer/internal/peers/forwardsig.go). One marked forwarded whose signature does not verify is refused
// with 401 before anything is done with it. body is the request's whole body.
func (s *server) forwarded(c echo.Context, body []byte) (bool, error) {
	if verified, _ := c.Get(forwardedVerifiedKey).(bool); verified {
		return true, nil // by the auth middleware (forwarded_auth.go)
	}
	if c.Request().Header.Get(wire.ForwardedHeader) == "" {
		return false, nil
	}
	if _, _, err := s.verifyForwarded(c, body); err != nil {
		return false, err
	}
	return true, nil
}

// readBody reads a JSON body of at most MaxBody bytes. A body whose length is known grows
// its buffer up to that length and no further, where io.ReadAll would double it past: what
// the budget counts (as the bytes come, not as announced: a client that announces 32 MiB
// and sends nothing holds nothing) is what is held.
func (s *server) readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	body := http.MaxBytesReader(nil, r.Body, s.cfg.MaxBody)
	if r.ContentLength <= 0 || r.ContentLength > s.cfg.MaxBody {
		return io.ReadAll(body)
	}
	return readSized(body, int(r.ContentLength))
}

// readSized reads r to its end into a buffer that grows by doubling up to size bytes and
// no further.
func readSized(r io.Reader, size int) ([]byte, error) {
	buf := make([]byte, 0, min(size, 64<<10))
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= size {
				// All of it: what follows is the end (net/http reads no further than the
				// length), or more than announced, appended as io.ReadAll would.
				var one [1]byte
				n, err := r.Read(one[:])
				buf = append(buf, one[:n]...)
				if err == io.EOF {
					return buf, nil
				}
				if err != nil {
					return nil, err
				}
				continue
			}
			grown := make([]byte, len(buf), min(2*cap(buf), size))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// decodeJSON decodes a JSON object body into v, refusing unknown fields; an empty body is
// an empty object.
func decodeJSON(body []byte, v any) error {
	if len(body) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("%s", describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("body: must be one JSON object, with nothing after it")
	}
	return nil
}

// decodeText decodes an optional text field (absent or null: ""): a JSON string of valid
// UTF-8 without NUL, at most max bytes (max 0: no bound here).
func decodeText(field string, raw json.RawMessage, max int) (string, error) {
	s, err := decodeContent(field, raw)
	if err != nil {
		return "", err
	}
	return s, checkText(field, nil, s, max)
}

// decodeContent decodes an optional JSON string of content (absent or null: ""), which may
// hold NUL but must be valid UTF-8.
func decodeContent(field string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || isNull(raw) {
		return "", nil
	}
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && plainText(raw[1:n-1]) {
		return string(raw[1 : n-1]), nil // what json.Unmarshal would give, without its reflection
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badRequest("%s: must be a string, not %s", field, abbreviate(raw))
	}
	if p := textProblem(raw); p != "" {
		return "", badRequest("%s: %s", field, p)
	}
	return s, nil
}

// plainText reports whether b, the inside of a JSON string, is its own value: valid UTF-8
// without escapes, quotes or control characters.
func plainText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}

// leaseDefault is the lease of a reserve or extend that names none: 5m, or less under a
// lower OPSQ_MAX_LEASE.
func (s *server) leaseDefault() time.Duration { return min(wire.LeaseDefault, s.maxLease()) }

// maxLease is the longest lease a reserve or extend may ask for (Config.MaxLease; New sets
// it, a server built without New has none set).
func (s *server) maxLease() time.Duration {
	if s.cfg.MaxLease <= 0 {
		return wire.MaxLease
	}
	return s.cfg.MaxLease
}

func parseDuration(v, field string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return 0, badRequest("%s: must be a duration between %s and %s, such as \"30s\"", field, lo, hi)
	}
	return d, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// describeJSONError turns a decoding error into a message that names the field.
func describeJSONError(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return fmt.Sprintf("%s: must not be a JSON %s", field, typ.Value)
	}
	if quoted, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, uerr := strconv.Unquote(quoted)
		if uerr != nil {
			name = quoted
		}
		return unknownField(name)
	}
	return "body: must be a JSON object (" + jsonProblem(err) + ")"
}
