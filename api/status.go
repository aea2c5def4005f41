package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/queuer/submissions"
)

func (s *server) status(c echo.Context) error {
	id, err := parseID(c.Param("id"), "id")
	if err != nil {
		return err
	}
	wait, err := parseWait(c.QueryParam("wait"))
	if err != nil {
		return err
	}
	var st queuer.Status
	if wait > 0 {
		st, err = s.q.Submissions().WaitFinished(c.Request().Context(), id, wait)
	} else {
		st, err = s.q.Submissions().Status(c.Request().Context(), id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toStatus(st))
}

// results streams the outputs of a completed submission as NDJSON, in chunk order.
func (s *server) results(c echo.Context) error {
	id, err := parseID(c.Param("id"), "id")
	if err != nil {
		return err
	}
	resp := c.Response()
	w := bufio.NewWriterSize(resp, 64<<10)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	started := false
	err = s.q.Submissions().Results(c.Request().Context(), id, func(r queuer.Result) error {
		if !started {
			started = true
			resp.Header().Set(echo.HeaderContentType, ndjsonType)
			resp.WriteHeader(http.StatusOK)
		}
		return enc.Encode(toResult(r))
	})
	if err != nil && started {
		// The status line is gone: cut the connection so that the client sees a broken
		// answer rather than a short one.
		s.log.WarnContext(c.Request().Context(), "results stream broken", "submission_id", id, "error", err)
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		return err
	}
	if !started {
		resp.Header().Set(echo.HeaderContentType, ndjsonType)
		resp.WriteHeader(http.StatusOK)
	}
	return w.Flush()
}

// toResult is a results line as the wire has it.
func toResult(r queuer.Result) wire.Result {
	if r.State == submissions.ResultCompleted {
		out := string(r.Output)
		return wire.Result{ChunkIndex: r.ChunkIndex, Output: &out}
	}
	return wire.Result{ChunkIndex: r.ChunkIndex, State: r.State, Error: r.Error}
}

func (s *server) cancel(c echo.Context) error {
	id, err := parseID(c.Param("id"), "id")
	if err != nil {
		return err
	}
	if err := s.checkCancel(c, id); err != nil {
		return err
	}
	st, err := s.q.Submissions().Cancel(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toStatus(st))
}

func (s *server) list(c echo.Context) error {
	opts := queuer.ListOptions{Limit: wire.ListLimitDefault}
	switch state := wire.State(c.QueryParam("state")); state {
	case "", wire.StateInProgress, wire.StateCompleted, wire.StateFailed, wire.StateCancelled:
		opts.State = state
	default:
		return badRequest("state: must be one of in_progress, completed, failed, cancelled")
	}
	key, value := c.QueryParam("key"), c.QueryParam("value")
	switch {
	case key != "" && !c.QueryParams().Has("value"):
		return badRequest("value: required with key")
	case key == "" && c.QueryParams().Has("value"):
		return badRequest("key: required with value")
	case key != "":
		if strings.ContainsRune(key, 0) || !utf8.ValidString(key) {
			return badRequest("key: must be UTF-8 text without NUL characters")
		}
		v, err := metadataValue(value)
		if err != nil {
			return err
		}
		opts.Key, opts.Value = key, v
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > wire.MaxListLimit {
			return badRequest("limit: must be an integer between 1 and %d", wire.MaxListLimit)
		}
		opts.Limit = n
	}
	if v := c.QueryParam("after"); v != "" {
		id, err := parseID(v, "after")
		if err != nil {
			return err
		}
		opts.After = id
	}
	list, more, err := s.q.Submissions().List(c.Request().Context(), opts)
	if err != nil {
		return err
	}
	page := wire.StatusList{Submissions: make([]wire.Status, 0, len(list))}
	for _, st := range list {
		page.Submissions = append(page.Submissions, toStatus(st))
	}
	if more {
		page.NextAfter = &page.Submissions[len(page.Submissions)-1].ID
	}
	return c.JSON(http.StatusOK, page)
}

// metadataValue reads a strategic metadata value from a query parameter: an integer when it
// is one (value=42), a JSON string when quoted (value="42" is the string 42), else the text
// itself (value=preview).
func metadataValue(v string) (json.RawMessage, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return json.RawMessage(strconv.FormatInt(n, 10)), nil // 042 and +42 are 42
	}
	var s string
	if err := json.Unmarshal([]byte(v), &s); err == nil {
		v = s
	}
	if strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
		return nil, badRequest("value: must be UTF-8 text without NUL characters")
	}
	b, _ := json.Marshal(v)
	return b, nil
}

func parseID(v, field string) (int64, error) {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("%s: %q is not a submission id (a positive decimal integer)", field, v)
	}
	return id, nil
}

func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > wire.MaxWait {
		return 0, badRequest("wait: must be a duration between 0s and %s, such as \"30s\"", wire.MaxWait)
	}
	return d, nil
}

// toStatus converts the queuer's status to its wire form.
func toStatus(st queuer.Status) wire.Status {
	out := wire.Status{
		ID:           strconv.FormatInt(st.ID, 10),
		State:        st.State,
		ChunksTotal:  st.ChunksTotal,
		ChunksDone:   st.ChunksDone,
		ChunksFailed: st.ChunksFailed,
		Priority:     st.Priority,
		Metadata:     st.Metadata,
		CreatedAt:    st.CreatedAt.UTC(),
		FinishedAt:   st.FinishedAt,
	}
	out.StrategicMetadata = map[string]wire.MetadataValue{}
	_ = json.Unmarshal(st.StrategicMetadata, &out.StrategicMetadata) // validated on the way in
	if st.Prefix != nil {
		out.Prefix = *st.Prefix
	}
	if st.FinishedAt != nil {
		t := st.FinishedAt.UTC()
		out.FinishedAt = &t
	}
	if st.State == wire.StateFailed && st.FailedChunkIndex != nil && st.Error != nil {
		out.Failure = &wire.Failure{ChunkIndex: *st.FailedChunkIndex, Error: *st.Error}
	}
	return out
}
