package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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

// submit inserts a submission given as one JSON object or as NDJSON (a header line, then
// one chunk per line, streamed into the database without a total size limit).
func (s *server) submit(c echo.Context) error {
	// NDJSON is chosen by its content type; any other body is read as JSON, so that a
	// plain "curl -d" works too.
	var sub queuer.NewSubmission
	var chunks queuer.Chunks
	var err error
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); mt == ndjsonType {
		sub, chunks, err = s.readNDJSONHeader(c.Request())
	} else {
		sub, chunks, err = s.readJSONSubmission(c.Request())
	}
	if err != nil {
		return err
	}
	sub.CreatedByKey = createdBy(c)
	if sub.Tenant, err = submitTenant(c, sub.Tenant); err != nil {
		return err
	}
	created, err := s.q.Submissions().Submit(c.Request().Context(), sub, chunks)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if created.Existing {
		st, err := s.q.Submissions().Status(c.Request().Context(), created.ID)
		if err != nil {
			return err
		}
		status, created.ChunksTotal = http.StatusOK, st.ChunksTotal
	}
	return c.JSON(status, wire.Created{ID: strconv.FormatInt(created.ID, 10), ChunksTotal: created.ChunksTotal})
}

// readJSONSubmission reads a whole JSON submission, at most MaxBody bytes.
func (s *server) readJSONSubmission(r *http.Request) (queuer.NewSubmission, queuer.Chunks, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxBody))
	if err != nil {
		return queuer.NewSubmission{}, nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return queuer.NewSubmission{}, nil, badRequest("body: must be a JSON object (%s)", jsonProblem(err))
	}
	sub, err := parseHeader(fields, true, s.maxChunks(), s.now())
	if err != nil {
		return sub, nil, err
	}
	var list []*string
	if raw, ok := fields["chunks"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &list); err != nil {
			return sub, nil, badChunks(raw)
		}
		if textProblem(raw) != "" {
			return sub, nil, badChunkText(raw)
		}
	}
	if int64(len(list)) > s.maxChunks() {
		return sub, nil, badRequest("chunks: %d chunks is over the %d-chunk limit of a submission (OPSQ_MAX_SUBMISSION_CHUNKS)", len(list), s.maxChunks())
	}
	for i, ch := range list {
		if ch == nil {
			return sub, nil, badRequest("chunks[%d]: must be a string, not null", i)
		}
		if len(*ch) > s.cfg.MaxChunkBytes {
			return sub, nil, tooLarge("chunks[%d]: %d bytes is over the %d-byte chunk limit (OPSQ_MAX_CHUNK_BYTES)", i, len(*ch), s.cfg.MaxChunkBytes)
		}
	}
	return sub, &sliceChunks{list: list}, nil
}

// badChunks finds which element of a "chunks" array that failed to decode is wrong.
func badChunks(raw json.RawMessage) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return badRequest("chunks: must be an array of strings")
	}
	for i, e := range elems {
		var s string
		if err := json.Unmarshal(e, &s); err != nil {
			return badRequest("chunks[%d]: must be a string, not %s", i, abbreviate(e))
		}
	}
	return badRequest("chunks: must be an array of strings")
}

// badChunkText finds which element of a "chunks" array holds text that is not UTF-8 (which
// decoding would replace with U+FFFD).
func badChunkText(raw json.RawMessage) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return badRequest("chunks: must be an array of strings")
	}
	for i, e := range elems {
		if p := textProblem(e); p != "" {
			return badRequest("chunks[%d]: %s", i, p)
		}
	}
	return badRequest("chunks: not valid UTF-8")
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

type sliceChunks struct {
	list []*string
	next int
}

func (c *sliceChunks) Next() ([]byte, error) {
	if c.next == len(c.list) {
		return nil, io.EOF
	}
	c.next++
	return []byte(*c.list[c.next-1]), nil
}

// readNDJSONHeader reads the header line of an NDJSON submission and returns a reader of
// the chunk lines that follow.
func (s *server) readNDJSONHeader(r *http.Request) (queuer.NewSubmission, queuer.Chunks, error) {
	lines := &ndjsonChunks{
		r:         bufio.NewReaderSize(r.Body, 1<<20),
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
