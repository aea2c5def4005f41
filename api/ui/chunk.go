package ui

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

// The chunk page (issue 33): one chunk of a submission — where it is, the start of its
// input and of its output (escaped by the template; binary shown as hex and base64, with
// its size), and its kept failed attempts with their errors, consumers and times. A failed
// or skipped chunk's page offers the retry of that chunk alone (POST …/retry with
// chunk_indexes), and the submission's Retry of all its failed chunks, each after a
// confirmation page.

// hexShown is how many bytes of a binary input or output the page shows as hex; the
// whole preview (queuer.ChunkPreviewMax) is in its base64.
const hexShown = 512

// blobView is a chunk's input or output as the page shows it.
type blobView struct {
	Stored bool   // false: none is kept
	Size   int64  // the whole, in bytes
	Read   int    // the bytes read (at most queuer.ChunkPreviewMax)
	Text   string // the bytes read, when they are text
	Hex    string // else a hex dump of the first hexShown of them
	Base64 string // and all of them in base64
	Cut    bool   // Read < Size
}

func toBlob(b []byte, size int64) blobView {
	if size < 0 {
		return blobView{}
	}
	v := blobView{Stored: true, Size: size, Read: len(b), Cut: int64(len(b)) < size}
	if isText(b, v.Cut) {
		v.Text = string(b)
		return v
	}
	v.Hex = hex.Dump(b[:min(len(b), hexShown)])
	v.Base64 = base64.StdEncoding.EncodeToString(b)
	return v
}

// isText reports whether b reads as text: UTF-8 (a rune cut at the end of a preview
// allowed) without control characters but tabs and line ends.
func isText(b []byte, cut bool) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return cut && len(b) < utf8.UTFMax && !utf8.FullRune(b)
		}
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
		b = b[n:]
	}
	return true
}

// chunkView is the chunk page.
type chunkView struct {
	Sub       submissionView
	Index     int64
	State     string // pending, waiting, failed, skipped, completed, or unknown
	Note      string // what the state means for this chunk
	Retries   int64
	Input     blobView
	Output    blobView
	Location  string // an object-storage chunk's: prefix + index
	Error     string // a failed chunk's last error
	Attempts  []attemptView
	Retry     string // the submission's retry that would retry this chunk too; "" none
	RetryNote string
	RetryOne  bool   // this chunk alone may be retried
	Prev      string // the previous and next chunk's indexes; "" at the ends
	Next      string
}

func (d *dashboard) chunkOf(c echo.Context) error {
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	index, err := strconv.ParseInt(c.Param("index"), 10, 64)
	if err != nil || index < 0 {
		return d.fail(c, http.StatusBadRequest, "index: %q is not a chunk index (0 or more)", cut(c.Param("index"), 40))
	}
	if index >= st.ChunksTotal {
		return d.fail(c, http.StatusNotFound, "submission %d has %s chunks (0 to %s); there is no chunk %s", st.ID, num(st.ChunksTotal), num(st.ChunksTotal-1), num(index))
	}
	ch, err := d.q.Chunk(c.Request().Context(), st.ID, index)
	if notFound(err) {
		return d.fail(c, http.StatusNotFound, "no chunk %d of submission %d (it may have been deleted after the retention period)", index, st.ID)
	}
	if err != nil {
		return err
	}
	now := time.Now()
	v := chunkView{Sub: toView(st, now), Index: index, State: ch.State, Retries: ch.Retries, Error: ch.Error,
		Input: toBlob(ch.Input, ch.InputSize), Output: toBlob(ch.Output, ch.OutputSize)}
	for _, e := range ch.Errors {
		v.Attempts = append(v.Attempts, attemptView{Error: e.Error, Consumer: e.Consumer, At: e.At.UTC().Format(time.RFC3339)})
	}
	if st.Prefix != nil {
		v.Location = *st.Prefix + strconv.FormatInt(index, 10)
	}
	if index > 0 {
		v.Prev = strconv.FormatInt(index-1, 10)
	}
	if index+1 < st.ChunksTotal {
		v.Next = strconv.FormatInt(index+1, 10)
	}
	v.Note = chunkNote(v, ch, now)
	applies := actionsOf(v.Sub)
	switch {
	case v.State == "failed" && slices.Contains(applies, "retry"):
		v.Retry = "retry"
	case (v.State == "failed" || v.State == "skipped" || v.State == "unknown") && slices.Contains(applies, "retry_unfinished"):
		v.Retry = "retry_unfinished"
	}
	v.RetryOne = (v.State == "failed" || v.State == "skipped") && v.Sub.State != wire.StateCompleted
	if v.Retry != "" {
		v.RetryNote = "Retry this chunk gives it alone a fresh attempt budget; the submission's retry gives one to this chunk and its other " +
			map[string]string{"retry": "failed", "retry_unfinished": "failed and skipped"}[v.Retry] + " ones."
	}
	return d.render(c, http.StatusOK, "chunk", page{Title: "Chunk " + num(index) + " of submission " + v.Sub.ID, Nav: "submissions", Data: v})
}

// chunkNote says what v's state means, with ch's details.
func chunkNote(v chunkView, ch queuer.ChunkInfo, now time.Time) string {
	switch v.State {
	case "pending":
		return "reservable, or reserved by a consumer now (reservations are held in memory, not in the database)"
	case "waiting":
		switch {
		case ch.ReadyAt == nil:
			return "held: its submission is paused; it is handed out again once resumed"
		case v.Sub.Scheduled:
			return "waiting for its submission's not_before, " + ch.ReadyAt.UTC().Format(time.RFC3339)
		}
		return "waiting out a retry's backoff: reservable again at " + ch.ReadyAt.UTC().Format(time.RFC3339) + " (in " + ago(ch.ReadyAt.Sub(now)) + ")"
	case "failed":
		return "its attempts are spent"
	case "skipped":
		return "never finished: its submission failed or was cancelled first"
	case "completed":
		return "done; its input is not kept once completed"
	case "":
		if v.Sub.State != wire.StateInProgress {
			return "never finished: its submission ended first (counted as skipped)"
		}
		return "not stored yet (its submission is still going in)"
	}
	return ""
}

// chunkJump opens the chunk page of the index the submission page's form names.
func (d *dashboard) chunkJump(c echo.Context) error {
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	index, err := strconv.ParseInt(strings.TrimSpace(c.QueryParam("index")), 10, 64)
	if err != nil || index < 0 {
		return d.fail(c, http.StatusBadRequest, "index: %q is not a chunk index (0 or more)", cut(c.QueryParam("index"), 40))
	}
	return c.Redirect(http.StatusSeeOther, "/ui/submissions/"+strconv.FormatInt(st.ID, 10)+"/chunks/"+strconv.FormatInt(index, 10))
}

// chip is a strategic metadata key and its value, as the pages show them: key = value.
type chip struct {
	Key, Value string
}

// chips are the strategic metadata (a JSON object of integers and strings) as key = value
// chips, in key order; a string that reads as an integer keeps its quotes, so that "42"
// and 42 differ. Metadata that is no such object is one chip of its text.
func chips(raw string) []chip {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		if raw == "" {
			return nil
		}
		return []chip{{Value: raw}}
	}
	out := make([]chip, 0, len(m))
	for k, v := range m {
		text := string(v)
		var s string
		if json.Unmarshal(v, &s) == nil {
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				text = s
			}
		}
		out = append(out, chip{Key: k, Value: text})
	}
	slices.SortFunc(out, func(a, b chip) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// chunkIndexOf is the chunk index of c's route, checked against st.
func (d *dashboard) chunkIndexOf(c echo.Context, st queuer.Status) (int64, bool, error) {
	index, err := strconv.ParseInt(c.Param("index"), 10, 32)
	if err != nil || index < 0 {
		return 0, false, d.fail(c, http.StatusBadRequest, "index: %q is not a chunk index (0 or more)", cut(c.Param("index"), 40))
	}
	if index >= st.ChunksTotal {
		return 0, false, d.fail(c, http.StatusNotFound, "submission %d has %s chunks (0 to %s); there is no chunk %s", st.ID, num(st.ChunksTotal), num(st.ChunksTotal-1), num(index))
	}
	return index, true, nil
}

// confirmRetryChunk asks to retry one chunk alone.
func (d *dashboard) confirmRetryChunk(c echo.Context) error {
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	index, ok, err := d.chunkIndexOf(c, st)
	if !ok {
		return err
	}
	id, idx := strconv.FormatInt(st.ID, 10), strconv.FormatInt(index, 10)
	back := "/ui/submissions/" + id + "/chunks/" + idx
	return d.render(c, http.StatusOK, "confirm", page{Title: "Retry chunk " + num(index) + " of submission " + id, Nav: "submissions", Data: confirmView{
		Question: "Retry chunk " + num(index) + " of submission " + id + "? It gets a fresh attempt budget and is handed out again (once its submission is resumed, if paused); the submission's other failed chunks stay failed.",
		Action:   back + "/retry", Back: back,
	}})
}

// retryChunk retries one chunk alone and shows its page again.
func (d *dashboard) retryChunk(c echo.Context) error {
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	index, ok, err := d.chunkIndexOf(c, st)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	_, err = d.q.Retry(ctx, st.ID, queuer.RetryOptions{ChunkIndexes: []int32{int32(index)}})
	switch {
	case errors.Is(err, queuer.ErrNothingToRetry):
		return d.fail(c, http.StatusConflict, "chunk %d of submission %d has not failed and was not skipped: nothing to retry", index, st.ID)
	case notFound(err):
		return d.fail(c, http.StatusNotFound, "no submission %d", st.ID)
	case err != nil:
		return err
	}
	d.log.InfoContext(ctx, "dashboard action", "action", "retry_chunk", "submission_id", st.ID, "chunk_index", index)
	return c.Redirect(http.StatusSeeOther, "/ui/submissions/"+strconv.FormatInt(st.ID, 10)+"/chunks/"+strconv.FormatInt(index, 10))
}
