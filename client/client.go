// Package client is a Go client for the opsq REST API v1 (DESIGN.md §3). The command-line
// tools, the tests and the benchmark use it.
package client

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"opsq/api/wire"
)

// UserAgentDefault is the User-Agent header a Client sends unless WithUserAgent says otherwise.
const UserAgentDefault = "opsq-client"

// defaultHTTPClient is shared by every Client built without WithHTTPClient, so that they
// share one connection pool. It keeps more idle connections per host than Go's default (2),
// since producers and consumers talk to one opsq address from many goroutines.
var defaultHTTPClient = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return t
}()}

// Client calls one opsq deployment (one instance or a load balancer in front of several).
// It is safe for concurrent use.
type Client struct {
	baseURL   string
	http      *http.Client
	userAgent string
	header    http.Header
	key       string // sent as Authorization: Bearer; "" for none
	maxAnswer int64  // 0: no limit
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc. Give hc no Timeout shorter
// than the longest long-poll wait you ask for (up to 60s), or use contexts instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header. Defaults to UserAgentDefault.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithHeader adds a header to every request (instances mark forwarded requests with it).
func WithHeader(key, value string) Option {
	return func(c *Client) {
		if c.header == nil {
			c.header = http.Header{}
		}
		c.header.Add(key, value)
	}
}

// WithKey makes the Client send key, an API key (opsq keys create), as
// "Authorization: Bearer <key>" with every request. Without it, a request carries the key
// of its context (ContextWithKey), if any.
func WithKey(key string) Option { return func(c *Client) { c.key = key } }

type keyContext struct{}

// ContextWithKey returns ctx carrying key: a Client built without WithKey sends it with the
// requests made with that context. An instance forwards a request on the caller's key so.
func ContextWithKey(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return context.WithValue(ctx, keyContext{}, key)
}

// KeyFromContext returns the key of ContextWithKey, or "".
func KeyFromContext(ctx context.Context) string {
	key, _ := ctx.Value(keyContext{}).(string)
	return key
}

// WithMaxResponseBytes bounds the body of every answer the Client reads to n bytes (n > 0):
// reading past it fails with an error that wraps ErrResponseTooLarge, and the rest of the
// body is not read. Without it, answers are read whole (Results streams them).
func WithMaxResponseBytes(n int64) Option { return func(c *Client) { c.maxAnswer = n } }

// ErrResponseTooLarge is wrapped by the error of a call whose answer exceeded the bound
// set by WithMaxResponseBytes.
var ErrResponseTooLarge = errors.New("opsq: answer larger than the client's limit")

// New returns a Client for the opsq server at baseURL, such as "http://localhost:3999".
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		baseURL:   strings.TrimRight(baseURL, "/"),
		http:      defaultHTTPClient,
		userAgent: UserAgentDefault,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Error is an answer of the server other than 2xx.
type Error struct {
	// StatusCode is the HTTP status, such as 400 or 409.
	StatusCode int
	// Code is the snake_case code of the error body, or "http_<status>" when the body was not
	// an opsq error (a proxy's error page, say).
	Code string
	// Message is the error body's message, or the body's text.
	Message string
}

// Error reads like "opsq: 400 bad_request: chunks[3]: must be a string".
func (e *Error) Error() string {
	return fmt.Sprintf("opsq: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// SubmitOption is an option of one Submit or SubmitNDJSON.
type SubmitOption func(*submitOptions)

type submitOptions struct {
	traceparent string
}

// WithTraceparent sends the W3C traceparent of the producer's span with the submission
// (the header traceparent, wire.HeaderTraceparent): the server stores it and hands it out
// with each of the submission's chunks (wire.ReservedChunk.Traceparent), so that the
// consumers' spans join the producer's trace. "" sends none. The server ignores a value
// that is not a valid traceparent (wire.ValidTraceparent): the submission then has none.
// It is ContextWithTraceparent for one submission.
func WithTraceparent(traceparent string) SubmitOption {
	return func(o *submitOptions) { o.traceparent = traceparent }
}

// submitContext carries opts to the request (do) in ctx.
func submitContext(ctx context.Context, opts []SubmitOption) context.Context {
	var o submitOptions
	for _, opt := range opts {
		opt(&o)
	}
	return ContextWithTraceparent(ctx, o.traceparent)
}

type traceparentContext struct{}

// ContextWithTraceparent returns ctx carrying traceparent, a W3C traceparent: every request
// made with that context sends it (the header traceparent, wire.HeaderTraceparent). A
// consumer completes, fails or extends a chunk with the traceparent of its own span, a
// child of the chunk's (wire.ReservedChunk.Traceparent), so that the instance's span of the
// request joins the trace beneath it (with OTEL_EXPORTER_OTLP_ENDPOINT set); a submission
// sent with one keeps it for its chunks (WithTraceparent). "" leaves ctx as it is.
func ContextWithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceparentContext{}, traceparent)
}

// Submit creates a submission from one JSON body. For many chunks, SubmitNDJSON streams
// them instead.
func (c *Client) Submit(ctx context.Context, s wire.Submission, opts ...SubmitOption) (wire.Created, error) {
	ctx = submitContext(ctx, opts)
	body, err := json.Marshal(s)
	if err != nil {
		return wire.Created{}, fmt.Errorf("opsq: encoding submission: %w", err)
	}
	var created wire.Created
	err = c.call(ctx, http.MethodPost, "/v1/submissions", nil, "application/json", bytes.NewReader(body), &created)
	return created, err
}

// SubmitNDJSON creates a submission from header and the chunks read from r, streamed as
// an application/x-ndjson body: the header line, then the lines of r as they are. r must
// yield NDJSON, one JSON string (a chunk) per line; LinesToNDJSON turns plain text lines
// into that. The body is never held in memory as a whole. The server inserts the
// submission atomically: an error (from r or the server) leaves no submission.
//
// The transport may still read r for a moment after SubmitNDJSON returns an error.
func (c *Client) SubmitNDJSON(ctx context.Context, header wire.SubmissionHeader, r io.Reader, opts ...SubmitOption) (wire.Created, error) {
	ctx = submitContext(ctx, opts)
	line, err := json.Marshal(header)
	if err != nil {
		return wire.Created{}, fmt.Errorf("opsq: encoding submission header: %w", err)
	}
	body := io.MultiReader(bytes.NewReader(append(line, '\n')), r)
	var created wire.Created
	err = c.call(ctx, http.MethodPost, "/v1/submissions", nil, "application/x-ndjson", body, &created)
	return created, err
}

// Status returns the state of submission id. With wait > 0 the server holds the request
// until the submission is finished or wait (at most 60s) has passed.
func (c *Client) Status(ctx context.Context, id string, wait time.Duration) (wire.Status, error) {
	path, err := submissionPath(id, "")
	if err != nil {
		return wire.Status{}, err
	}
	var q url.Values
	if wait > 0 {
		q = url.Values{"wait": {wait.String()}}
	}
	var s wire.Status
	err = c.call(ctx, http.MethodGet, path, q, "", nil, &s)
	return s, err
}

// Results streams the results of submission id, in any state, one line per chunk in
// chunk order, calling fn for each: a completed chunk's output, or the state of one that
// is not (failed, skipped, pending). An error from fn stops the stream and is returned as
// is.
func (c *Client) Results(ctx context.Context, id string, fn func(wire.Result) error) error {
	_, err := c.results(ctx, id, false, -1, fn)
	return err
}

// ResultsFollow streams the results of submission id as its chunks finish: fn is called
// with each chunk's line once that chunk and every chunk before it are finished
// (completed, failed or skipped), in chunk order, and ResultsFollow returns once the
// submission is finished and every line handed to fn, or when ctx ends. The server ends a
// followed stream after a while (OPSQ_MAX_FOLLOW, 1h); ResultsFollow then follows again
// from the line after the last it handed to fn, so fn sees each line once.
func (c *Client) ResultsFollow(ctx context.Context, id string, fn func(wire.Result) error) error {
	last := int64(-1)
	for {
		n, err := c.results(ctx, id, true, last, fn)
		if err != nil {
			return err
		}
		progressed := n > last
		last = n
		// The stream ended: the submission finished, or the server's bound on a follow.
		st, err := c.Status(ctx, id, 0)
		switch {
		case err != nil:
			return err
		case st.Finished() && last+1 >= st.ChunksTotal:
			return nil
		case st.Finished() && !progressed:
			return fmt.Errorf("opsq: following results of submission %s: the stream ended after chunk %d of %d", id, last, st.ChunksTotal)
		case !progressed:
			// Nothing new before the stream ended: do not spin on a server or proxy that
			// cuts streams at once.
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
	}
}

// results streams the results of submission id, following them or not, skipping the
// lines up to chunk index after, and returns the last chunk index handed to fn (after
// when none).
func (c *Client) results(ctx context.Context, id string, follow bool, after int64, fn func(wire.Result) error) (int64, error) {
	path, err := submissionPath(id, "/results")
	if err != nil {
		return after, err
	}
	var q url.Values
	if follow {
		q = url.Values{"follow": {"true"}}
	}
	resp, err := c.do(ctx, http.MethodGet, path, q, "", nil)
	if err != nil {
		return after, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var r wire.Result
		if err := dec.Decode(&r); err == io.EOF {
			return after, nil
		} else if err != nil {
			return after, fmt.Errorf("opsq: reading results of submission %s: %w", id, err)
		}
		if r.ChunkIndex <= after {
			continue // handed to fn by an earlier stream
		}
		if err := fn(r); err != nil {
			return after, err
		}
		after = r.ChunkIndex
	}
}

// FailuresOptions selects a page of Failures.
type FailuresOptions struct {
	// Limit is the page size, at most 1000. Defaults to the server's (100).
	Limit int
	// After is the NextAfter of the previous page; nil for the first page.
	After *int64
}

// Failures returns one page of the chunks of submission id that failed at least one
// attempt, in chunk order, each with its last errors.
func (c *Client) Failures(ctx context.Context, id string, opts FailuresOptions) (wire.Failures, error) {
	path, err := submissionPath(id, "/failures")
	if err != nil {
		return wire.Failures{}, err
	}
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.After != nil {
		q.Set("after", strconv.FormatInt(*opts.After, 10))
	}
	var f wire.Failures
	err = c.call(ctx, http.MethodGet, path, q, "", nil, &f)
	return f, err
}

// Retry gives the failed chunks of submission id (with req.Chunks RetryUnfinished, the
// skipped ones too) a fresh attempt budget and returns its status. The server answers 409
// (code nothing_to_retry) when there is nothing to retry.
//
// With req.ChunkIndexes, only those chunks are retried (each if it failed or was skipped):
// the retry of one chunk, or of a selection.
func (c *Client) Retry(ctx context.Context, id string, req wire.RetryRequest) (wire.Status, error) {
	path, err := submissionPath(id, "/retry")
	if err != nil {
		return wire.Status{}, err
	}
	var s wire.Status
	err = c.postJSON(ctx, path, req, &s)
	return s, err
}

// RetryMany retries every submission req selects, newest first, and returns the ids
// retried (those with nothing to retry are left out).
func (c *Client) RetryMany(ctx context.Context, req wire.RetryManyRequest) ([]string, error) {
	var out wire.Retried
	if err := c.postJSON(ctx, "/v1/submissions/retry", req, &out); err != nil {
		return nil, err
	}
	return out.Retried, nil
}

// Pause stops handing out the chunks of submission id (those in flight finish as usual)
// and returns its status. Pausing a paused submission is harmless; the server answers 409
// if it has finished.
func (c *Client) Pause(ctx context.Context, id string) (wire.Status, error) {
	return c.postStatus(ctx, id, "/pause")
}

// Resume makes a paused submission reservable again at once and returns its status.
func (c *Client) Resume(ctx context.Context, id string) (wire.Status, error) {
	return c.postStatus(ctx, id, "/resume")
}

// postStatus posts to /v1/submissions/{id}{suffix}, without a body, and decodes the status.
func (c *Client) postStatus(ctx context.Context, id, suffix string) (wire.Status, error) {
	path, err := submissionPath(id, suffix)
	if err != nil {
		return wire.Status{}, err
	}
	var s wire.Status
	err = c.call(ctx, http.MethodPost, path, nil, "", nil, &s)
	return s, err
}

// Cancel cancels submission id and returns its status. The server answers 409 if it has
// already finished.
func (c *Client) Cancel(ctx context.Context, id string) (wire.Status, error) {
	return c.postStatus(ctx, id, "/cancel")
}

// ListOptions selects the submissions List returns. The zero value lists the newest
// submissions in any state.
type ListOptions struct {
	// State is one of the State* constants, or "" for any state.
	State wire.State
	// Key and Value select submissions whose strategic metadata has Key = Value; give both
	// or neither.
	Key, Value string
	// Limit is the page size, at most MaxListLimit. Defaults to the server's default
	// (ListLimitDefault).
	Limit int
	// After is the NextAfter of the previous page, or "" for the first page.
	After string
	// Tenant selects one tenant's submissions (admin keys; a producer key sees its own
	// tenant's only), or "" for every tenant the key may see.
	Tenant string
}

// List returns one page of submissions, newest first.
func (c *Client) List(ctx context.Context, opts ListOptions) (wire.StatusList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"state": string(opts.State), "key": opts.Key, "value": opts.Value, "after": opts.After, "tenant": opts.Tenant} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var l wire.StatusList
	err := c.call(ctx, http.MethodGet, "/v1/submissions", q, "", nil, &l)
	return l, err
}

// submissionPath returns /v1/submissions/{id}{suffix}.
func submissionPath(id, suffix string) (string, error) {
	if id == "" {
		return "", errors.New("opsq: empty submission id")
	}
	return "/v1/submissions/" + url.PathEscape(id) + suffix, nil
}

// call sends a request and decodes the JSON answer into out.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, contentType string, body io.Reader, out any) error {
	resp, err := c.do(ctx, method, path, q, contentType, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("opsq: decoding the answer to %s %s: %w", method, path, err)
	}
	// Read the rest (a newline) so that the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return nil
}

// do sends a request and returns the response if its status is 2xx, else an *Error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, contentType string, body io.Reader) (*http.Response, error) {
	u := c.baseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("opsq: building request: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", c.userAgent)
	for k, v := range c.header {
		req.Header[k] = v
	}
	if key := cmp.Or(c.key, KeyFromContext(ctx)); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if tp, ok := ctx.Value(traceparentContext{}).(string); ok {
		req.Header.Set(wire.HeaderTraceparent, tp)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err // a *url.Error naming the method and URL
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, errorFrom(resp)
	}
	if c.maxAnswer > 0 {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: c.maxAnswer, limit: c.maxAnswer}
	}
	return resp, nil
}

// limitedBody reads at most limit bytes of a body, then fails with ErrResponseTooLarge if
// the body goes on. It never reads more than limit+1 bytes of the underlying body.
type limitedBody struct {
	io.ReadCloser
	left, limit int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the limit: one more byte says whether the body goes on.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%w (%d bytes)", ErrResponseTooLarge, b.limit)
		} else if err != nil {
			return 0, err
		}
		return 0, nil
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// errorFrom decodes the error body of resp.
func errorFrom(resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb wire.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		return &Error{StatusCode: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 1<<10 {
		msg = msg[:1<<10] + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &Error{StatusCode: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: msg}
}

// LinesToNDJSON returns a reader of NDJSON chunk lines, one JSON string per line of plain
// text read from r, for SubmitNDJSON. It streams, holding one line at a time, of any
// length. A line ending is "\n" or "\r\n" and is not part of the chunk; a final newline
// does not make an extra empty chunk. A line that is not valid UTF-8 is an error, since a
// JSON string cannot carry it unchanged.
func LinesToNDJSON(r io.Reader) io.Reader {
	return &linesReader{br: bufio.NewReaderSize(r, 64<<10)}
}

type linesReader struct {
	br   *bufio.Reader
	n    int    // lines read so far
	line []byte // the line being read
	buf  []byte // the encoded line
	out  []byte // what is left of buf to hand out
	err  error  // the error to return once out is empty
}

// Read fills p with as many lines as fit: the HTTP transport sends each Read as one chunk
// of the body, so a line per Read would cost a write per line.
func (l *linesReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(l.out) == 0 {
			if l.err != nil {
				break
			}
			l.next()
			continue
		}
		c := copy(p[n:], l.out)
		l.out = l.out[c:]
		n += c
	}
	if n > 0 {
		return n, nil
	}
	return 0, l.err
}

// next reads one line and encodes it into out, or sets err.
func (l *linesReader) next() {
	l.line = l.line[:0]
	for {
		frag, err := l.br.ReadSlice('\n')
		l.line = append(l.line, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			l.err = err
			if len(l.line) == 0 {
				return // end of input right after a newline
			}
		}
		break
	}
	l.n++
	line := bytes.TrimSuffix(l.line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if !utf8.Valid(line) {
		l.err = fmt.Errorf("line %d is not valid UTF-8: chunks are JSON strings, so encode binary data first (base64, say)", l.n)
		return
	}
	l.buf = append(appendJSONString(l.buf[:0], line), '\n')
	l.out = l.buf
}

// appendJSONString appends s, valid UTF-8, to b as a JSON string.
func appendJSONString(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
