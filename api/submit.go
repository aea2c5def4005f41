package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

const ndjsonType = "application/x-ndjson"

// ndjsonBuffer is the read buffer of an NDJSON submission.
const ndjsonBuffer = 1 << 20

// submit inserts a submission given as one JSON object or as NDJSON (a header line, then
// one chunk per line, streamed into the database without a total size limit).
func (s *server) submit(c echo.Context) error {
	// An ingest, body and insert, lasts at most MaxIngestTime: its body's reads stop then,
	// and so does its insert.
	parent := c.Request().Context()
	ctx, cancel := context.WithTimeout(parent, s.cfg.MaxIngestTime)
	defer cancel()
	if b := idleBodyOf(c); b != nil {
		b.setUntil(s.cfg.MaxIngestTime)
	}
	err := s.ingest(ctx, c)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
		return errIngestTime(s.cfg.MaxIngestTime)
	}
	return err
}

// ingest reads and inserts a submission under ctx.
func (s *server) ingest(ctx context.Context, c echo.Context) error {
	// NDJSON is chosen by its content type; any other body is read as JSON, so that a
	// plain "curl -d" works too.
	var sub queuer.NewSubmission
	var chunks queuer.Chunks
	var err error
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); mt == ndjsonType {
		sub, chunks, err = s.readNDJSONHeader(c.Request(), holdOf(c))
	} else {
		sub, chunks, err = s.readJSONSubmission(c.Request())
	}
	if err != nil {
		return err
	}
	sub.CreatedByKey = createdBy(c)
	// A traceparent that is not valid is ignored, as the W3C recommendation says of a
	// receiver: the submission is stored without one, and the request does not fail.
	if tp := c.Request().Header.Get(wire.HeaderTraceparent); wire.ValidTraceparent(tp) {
		sub.Traceparent = tp
	}
	if sub.Tenant, err = submitTenant(c, sub.Tenant); err != nil {
		return err
	}
	created, err := s.q.Submit(ctx, sub, chunks)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if created.Existing {
		st, err := s.q.Status(ctx, created.ID)
		if err != nil {
			return err
		}
		status, created.ChunksTotal = http.StatusOK, st.ChunksTotal
	}
	return c.JSON(status, wire.Created{ID: strconv.FormatInt(created.ID, 10), ChunksTotal: created.ChunksTotal})
}

// readJSONSubmission reads a whole JSON submission, at most MaxBody bytes. The "chunks"
// array is decoded one element at a time into one arena, so that the decode holds about
// what the body holds (the middleware counts it in the budget) rather than several times
// it; the chunks go to the database once the other fields, which may come after them, are
// read and checked.
func (s *server) readJSONSubmission(r *http.Request) (queuer.NewSubmission, queuer.Chunks, error) {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, s.cfg.MaxBody))
	fields := map[string]json.RawMessage{}
	var arena *chunkArena
	var chunksErr error // the first thing wrong with the chunks, reported after the header's
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return queuer.NewSubmission{}, nil, notObject(err, tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return queuer.NewSubmission{}, nil, notObject(err, nil)
		}
		name, _ := tok.(string)
		if name != "chunks" {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return queuer.NewSubmission{}, nil, notObject(err, nil)
			}
			fields[name] = raw
			continue
		}
		arena = newChunkArena(r.ContentLength, s.cfg.MaxBody)
		null, err := s.decodeChunks(dec, arena, &chunksErr)
		if err != nil {
			return queuer.NewSubmission{}, nil, err
		}
		if null {
			fields[name], arena = json.RawMessage("null"), nil
		} else {
			fields[name] = json.RawMessage("[]") // decoded into arena
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return queuer.NewSubmission{}, nil, notObject(err, nil)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil && !isSyntaxError(err) {
			return queuer.NewSubmission{}, nil, err // the body's reader: too large, cut, busy
		}
		return queuer.NewSubmission{}, nil, badRequest("body: must be one JSON object, with nothing after it")
	}
	sub, err := parseHeader(fields, true, s.maxChunks(), s.now())
	if err != nil {
		return sub, nil, err
	}
	if chunksErr != nil {
		return sub, nil, chunksErr
	}
	if arena == nil {
		return sub, &arenaChunks{arena: &chunkArena{}}, nil
	}
	return sub, &arenaChunks{arena: arena}, nil
}

// decodeChunks decodes the value of a "chunks" field into arena, one element at a time.
// It reports a null value. What is wrong with the elements goes to *bad (the first
// thing only; decoding goes on, holding nothing more, so that a body's syntax error is
// still reported first); an error returned is the body's (syntax, size, budget).
func (s *server) decodeChunks(dec *json.Decoder, arena *chunkArena, bad *error) (null bool, err error) {
	tok, err := dec.Token()
	if err != nil {
		return false, notObject(err, nil)
	}
	switch tok {
	case nil:
		return true, nil
	case json.Delim('['):
	default:
		if d, ok := tok.(json.Delim); ok {
			if err := skipValue(dec, d); err != nil {
				return false, err
			}
		}
		*bad = badRequest("chunks: must be an array of strings")
		return false, nil
	}
	var raw json.RawMessage
	for i := 0; dec.More(); i++ {
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return false, notObject(err, nil)
		}
		if *bad != nil {
			continue
		}
		if int64(i) >= s.maxChunks() {
			*bad = badRequest("chunks: more than the %d-chunk limit of a submission (OPSQ_MAX_SUBMISSION_CHUNKS)", s.maxChunks())
			continue
		}
		var ch *string
		if err := json.Unmarshal(raw, &ch); err != nil || ch == nil {
			*bad = badRequest("chunks[%d]: must be a string, not %s", i, abbreviate(raw))
			continue
		}
		if p := textProblem(raw); p != "" {
			*bad = badRequest("chunks[%d]: %s", i, p)
			continue
		}
		if len(*ch) > s.cfg.MaxChunkBytes {
			*bad = tooLarge("chunks[%d]: %d bytes is over the %d-byte chunk limit (OPSQ_MAX_CHUNK_BYTES)", i, len(*ch), s.cfg.MaxChunkBytes)
			continue
		}
		arena.add(*ch)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return false, notObject(err, nil)
	}
	return false, nil
}

// skipValue reads the rest of an object or array whose opening delimiter was read.
func skipValue(dec *json.Decoder, open json.Delim) error {
	if open != '{' && open != '[' {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return notObject(err, nil)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// notObject is the error of a JSON submission that is not one well-formed object: a 400
// for bad JSON (tok is the first token, when that is what is wrong), or the body reader's
// own error (too large, cut, over the budget) as it is.
func notObject(err error, tok json.Token) error {
	switch {
	case err == nil:
		if tok == nil {
			return badRequest("body: must be a JSON object (found null)")
		}
		return badRequest("body: must be a JSON object (found %s)", abbreviate([]byte(fmt.Sprint(tok))))
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("body: must be a JSON object (unexpected end of JSON input)")
	case isSyntaxError(err):
		return badRequest("body: must be a JSON object (%s)", jsonProblem(err))
	}
	return err
}

func isSyntaxError(err error) bool {
	var syn *json.SyntaxError
	return errors.As(err, &syn)
}

// chunkArena holds the decoded chunks of a JSON submission back to back, with where each
// ends: about as many bytes as the body, and 4 per chunk.
type chunkArena struct {
	data []byte
	ends []uint32
}

// newChunkArena makes an arena for a body of contentLength bytes (-1: unknown). It starts
// small, whatever the length announced: a client that announces 32 MiB and sends nothing
// must hold nothing. append grows it by a quarter at a time once it is large.
func newChunkArena(contentLength, maxBody int64) *chunkArena {
	return &chunkArena{data: make([]byte, 0, min(max(contentLength, 0), maxBody, 64<<10))}
}

func (a *chunkArena) add(ch string) {
	a.data = append(a.data, ch...)
	a.ends = append(a.ends, uint32(len(a.data)))
}

// arenaChunks yields an arena's chunks in order.
type arenaChunks struct {
	arena *chunkArena
	next  int
}

func (c *arenaChunks) Next() ([]byte, error) {
	if c.next == len(c.arena.ends) {
		return nil, io.EOF
	}
	var start uint32
	if c.next > 0 {
		start = c.arena.ends[c.next-1]
	}
	end := c.arena.ends[c.next]
	c.next++
	return c.arena.data[start:end:end], nil
}

// maxChunks is the most chunks a submission may have.
func (s *server) maxChunks() int64 {
	return min(s.cfg.MaxSubmissionChunks, maxChunkIndexCount)
}

// jsonProblem describes a JSON syntax error with its byte offset.
func jsonProblem(err error) string {
	if err == nil {
		return "found null"
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return syn.Error() + " at byte " + strconv.FormatInt(syn.Offset, 10)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return "found " + typ.Value
	}
	return err.Error()
}

// readNDJSONHeader reads the header line of an NDJSON submission and returns a reader of
// the chunk lines that follow.
// The budget counts what it holds: its buffer, and its longest line so far twice (as read,
// and decoded), not the body, which has no total limit.
func (s *server) readNDJSONHeader(r *http.Request, h *hold) (queuer.NewSubmission, queuer.Chunks, error) {
	if err := h.growTo(r.Context(), ndjsonBuffer); err != nil {
		return queuer.NewSubmission{}, nil, err
	}
	lines := &ndjsonChunks{
		ctx:       r.Context(),
		hold:      h,
		r:         bufio.NewReaderSize(r.Body, ndjsonBuffer),
		maxChunk:  s.cfg.MaxChunkBytes,
		maxChunks: s.maxChunks(),
		// A chunk of n bytes takes up to 6n+2 bytes as a JSON string (\u escapes).
		maxLine: 6*s.cfg.MaxChunkBytes + 2,
	}
	header, err := lines.readLine(int(min(s.cfg.MaxBody, 1<<30)))
	if err == io.EOF {
		return queuer.NewSubmission{}, nil, badRequest("body: empty; the first NDJSON line must be the submission header object")
	}
	if err != nil {
		return queuer.NewSubmission{}, nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(header, &fields); err != nil || fields == nil {
		return queuer.NewSubmission{}, nil, badRequest("line 1: the header must be a JSON object (%s)", jsonProblem(err))
	}
	sub, err := parseHeader(fields, false, s.maxChunks(), s.now())
	if err != nil || sub.Prefix == "" {
		return sub, lines, err
	}
	// Object-storage mode has no chunk lines: refuse them rather than drop them.
	if _, err := lines.Next(); err != io.EOF {
		if err != nil {
			return sub, nil, err
		}
		return sub, nil, badRequest("line %d: object-storage mode (prefix and chunk_count) takes no chunk lines", lines.line)
	}
	return sub, lines, nil
}

// ndjsonChunks decodes one chunk per line, each a JSON string. Empty lines are skipped.
type ndjsonChunks struct {
	ctx       context.Context
	hold      *hold // what it holds of the budget
	r         *bufio.Reader
	line      int // lines read, the header included
	chunk     int // chunks returned
	maxChunk  int
	maxChunks int64 // chunks a submission may have
	maxLine   int
	buf       []byte
	decoded   []byte
}

// readLine returns the next line without its end ("\n" or "\r\n"), or io.EOF.
func (n *ndjsonChunks) readLine(limit int) ([]byte, error) {
	n.buf = n.buf[:0]
	for {
		part, err := n.r.ReadSlice('\n')
		n.buf = append(n.buf, part...)
		if gerr := n.hold.growTo(n.ctx, int64(ndjsonBuffer+cap(n.buf)+cap(n.decoded))); gerr != nil {
			return nil, gerr
		}
		if len(n.buf) > limit+2 {
			return nil, tooLarge("line %d: longer than %d bytes; a chunk may hold at most %d bytes (OPSQ_MAX_CHUNK_BYTES)", n.line+1, limit, n.maxChunk)
		}
		switch {
		case err == nil:
			n.line++
			return trimEOL(n.buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(n.buf) > 0:
			n.line++
			return trimEOL(n.buf), nil
		default:
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// Next implements queuer.Chunks.
func (n *ndjsonChunks) Next() ([]byte, error) {
	for {
		line, err := n.readLine(n.maxLine)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if int64(n.chunk) >= n.maxChunks {
			return nil, badRequest("line %d (chunk %d): over the %d-chunk limit of a submission (OPSQ_MAX_SUBMISSION_CHUNKS)", n.line, n.chunk, n.maxChunks)
		}
		content, err := n.decode(line)
		if err != nil {
			return nil, err
		}
		if len(content) > n.maxChunk {
			return nil, tooLarge("line %d (chunk %d): %d bytes is over the %d-byte chunk limit (OPSQ_MAX_CHUNK_BYTES)", n.line, n.chunk, len(content), n.maxChunk)
		}
		n.chunk++
		return content, nil
	}
}

// decode returns the content of a JSON string line. Lines without escapes, the common
// case, are taken as they are, without going through encoding/json.
func (n *ndjsonChunks) decode(line []byte) ([]byte, error) {
	if len(line) >= 2 && line[0] == '"' && line[len(line)-1] == '"' {
		inner := line[1 : len(line)-1]
		if plain(inner) {
			return inner, nil
		}
	}
	var s *string
	if err := json.Unmarshal(line, &s); err != nil || s == nil {
		return nil, badRequest("line %d (chunk %d): must be a JSON string (%s)", n.line, n.chunk, jsonProblem(err))
	}
	if p := textProblem(line); p != "" {
		return nil, badRequest("line %d (chunk %d): %s", n.line, n.chunk, p)
	}
	n.decoded = append(n.decoded[:0], *s...)
	return n.decoded, nil
}

// plain reports whether b needs no JSON unescaping: no quote, backslash or control
// character, and valid UTF-8.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}
