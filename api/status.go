package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
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
	if err := s.checkTenant(c, id); err != nil {
		return err
	}
	var st queuer.Status
	if wait > 0 {
		st, err = s.q.WaitFinished(c.Request().Context(), id, wait)
	} else {
		st, err = s.q.Status(c.Request().Context(), id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toStatus(st))
}

// results streams one line per chunk as NDJSON, in chunk order, in any state. With
// ?follow=true it writes each line once its chunk (and every chunk before it) is finished,
// and ends when the submission finishes, or after Config.MaxFollow.
func (s *server) results(c echo.Context) error {
	id, err := parseID(c.Param("id"), "id")
	if err != nil {
		return err
	}
	follow, err := parseBool(c.QueryParam("follow"), "follow")
	if err != nil {
		return err
	}
	if err := s.checkTenant(c, id); err != nil {
		return err
	}
	ctx := c.Request().Context()
	// yctx ends too when the stream is asked to give its slot up to another client
	// (slots.go): a follow then ends after a whole line, as at MaxFollow.
	yctx := yieldContext(c, ctx)
	resp := c.Response()
	w := bufio.NewWriterSize(resp, 64<<10)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	started := false
	start := func() {
		started = true
		resp.Header().Set(echo.HeaderContentType, ndjsonType)
		resp.WriteHeader(http.StatusOK)
	}
	if !follow {
		err = s.q.Results(yctx, id, func(r queuer.Result) error {
			if !started {
				start()
			}
			return enc.Encode(toResult(r))
		})
	} else {
		// The status line goes out at once, so that a follower knows the submission
		// exists while it waits for the first line: an unknown id is a 404 first.
		if _, err := s.q.Status(ctx, id); err != nil {
			return err
		}
		if act := streamActivityOf(c); act != nil {
			act.follow.Store(true)
		}
		start()
		if err := w.Flush(); err != nil {
			return err
		}
		resp.Flush()
		fctx, cancel := context.WithTimeout(yctx, s.cfg.MaxFollow)
		defer cancel()
		err = s.q.FollowResults(fctx, id, func(r queuer.Result) error {
			if err := enc.Encode(toResult(r)); err != nil {
				return err
			}
			if err := w.Flush(); err != nil { // each line as the engine hands it
				return err
			}
			resp.Flush()
			return nil
		})
		if err != nil && fctx.Err() != nil && ctx.Err() == nil {
			// MaxFollow, or the slot given up: the stream ends after a whole line; the
			// client follows again.
			err = nil
		}
	}
	if err != nil && started {
		// The status line is gone: cut the connection so that the client sees a broken
		// answer rather than a short one.
		s.log.WarnContext(ctx, "results stream broken", "submission_id", id, "error", err)
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		return err
	}
	if !started {
		start()
	}
	return w.Flush()
}

// parseBool reads a boolean query parameter: "" is false.
func parseBool(v, field string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("%s: must be true or false, not %q", field, abbreviate([]byte(v)))
	}
	return b, nil
}

// toResult is a results line as the wire has it.
func toResult(r queuer.Result) wire.Result {
	if r.State == queuer.ResultCompleted {
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
	if err := s.checkTenant(c, id); err != nil {
		return err
	}
	st, err := s.q.Cancel(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toStatus(st))
}

func (s *server) list(c echo.Context) error {
	var err error
	opts := queuer.ListOptions{Limit: wire.ListLimitDefault}
	switch state := wire.State(c.QueryParam("state")); state {
	case "", wire.StateInProgress, wire.StateCompleted, wire.StateFailed, wire.StateCancelled:
		opts.State = state
	case wire.ListRunning, wire.ListPaused, wire.ListScheduled: // in progress, by phase
		opts.State, opts.Phase = wire.StateInProgress, string(state)
	default:
		return badRequest("state: must be one of in_progress, running, paused, scheduled, completed, failed, cancelled")
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
	if opts.Tenant, err = listTenant(c, c.QueryParam("tenant")); err != nil {
		return err
	}
	// The page is cut at MaxListPageBytes; what it holds while it is read and written (the
	// rows, the answer's values made of them) is counted first.
	opts.MaxBytes = MaxListPageBytes
	if err := holdOf(c).growTo(c.Request().Context(), listPageFactor*MaxListPageBytes); err != nil {
		return err
	}
	list, more, err := s.q.List(c.Request().Context(), opts)
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

// listTenant is the tenant a list (or a retry by filter) selects: a producer key's own
// (naming another is 403), or the one named by an admin key or without keys ("": all).
func listTenant(c echo.Context, named string) (string, error) {
	if named != "" {
		if err := queuer.CheckTenant(named); err != nil {
			return "", badRequest("tenant: %v", err)
		}
	}
	own, ok := ownTenant(c)
	if !ok {
		return named, nil
	}
	if named != "" && named != own {
		k, _ := caller(c)
		return "", &Error{Status: http.StatusForbidden, Code: "forbidden", Message: fmt.Sprintf(
			"tenant: the key %q sees the tenant %q only (an admin key sees every tenant)", k.Name, own)}
	}
	return own, nil
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
		ID:            strconv.FormatInt(st.ID, 10),
		Tenant:        st.Tenant,
		State:         st.State,
		Paused:        st.Paused,
		ChunksTotal:   st.ChunksTotal,
		ChunksDone:    st.ChunksDone,
		ChunksFailed:  st.ChunksFailed,
		ChunksSkipped: st.ChunksSkipped,
		Priority:      st.Priority,
		Metadata:      st.Metadata,
		OnFailure:     st.OnFailure,
		CreatedAt:     st.CreatedAt.UTC(),
		FinishedAt:    st.FinishedAt,
	}
	if len(out.OnFailure) == 0 {
		out.OnFailure = wire.OnFailureFailSubmission
	}
	if st.NotBefore != nil {
		t := st.NotBefore.UTC()
		out.NotBefore = &t
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
	// The chunk that failed the submission, or under "continue" its last failed chunk.
	if st.State == wire.StateFailed && st.FailedChunkIndex != nil && st.Error != nil {
		idx := *st.FailedChunkIndex
		out.Failure = &wire.Failure{ChunkIndex: &idx, Error: *st.Error}
	}
	if d := st.Dependencies; d != nil {
		out.After, out.AfterPolicy, out.WaitingOn = ids(d.After), d.Policy, ids(d.WaitingOn)
		if len(out.WaitingOn) == 0 {
			out.WaitingOn = nil
		}
		// A parent's end cancelled it.
		if st.State == wire.StateCancelled && d.Failure != "" {
			out.Failure = &wire.Failure{Error: d.Failure}
		}
	}
	return out
}

// ids writes submission ids as the API does, decimal strings.
func ids(in []int64) []string {
	out := make([]string, len(in))
	for i, id := range in {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}
