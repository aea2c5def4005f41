package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

// pageSize is the submissions on one page of the list.
const pageSize = 50

// submissionView is a submission as the pages show it.
type submissionView struct {
	ID         string
	Tenant     string
	State      wire.State
	Total      int64
	Done       int64
	Failed     int64
	Skipped    int64
	Paused     bool
	Scheduled  bool   // not paused, its not_before still ahead: it hands nothing out yet
	Policy     string // the failure policy, in words
	NotBefore  string // "" for none
	Priority   int64
	Age        string
	Metadata   string
	Strategic  string // the strategic metadata as JSON
	Prefix     string
	CreatedAt  string
	FinishedAt string
	Failure    *wire.Failure
	Retries    int64
	// A child's (submitted with after): its parents with their states, those it waits on,
	// and its policy; Parents nil for a submission that is no child.
	Parents     []familyLink
	WaitingOn   []familyLink
	AfterPolicy string
}

// familyLink is a parent of a submission, linked.
type familyLink struct {
	ID    string
	State string // "" when unknown (deleted by retention)
}

func toView(st queuer.Status, now time.Time) submissionView {
	v := submissionView{
		ID: strconv.FormatInt(st.ID, 10), Tenant: st.Tenant, State: st.State, Total: st.ChunksTotal, Done: st.ChunksDone,
		Failed: st.ChunksFailed, Skipped: st.ChunksSkipped, Paused: st.Paused, Policy: policyText(st.OnFailure), Priority: st.Priority, Age: ago(now.Sub(st.CreatedAt)), Metadata: st.Metadata,
		Strategic: string(st.StrategicMetadata), CreatedAt: st.CreatedAt.UTC().Format(time.RFC3339),
	}
	if st.Prefix != nil {
		v.Prefix = *st.Prefix
	}
	if st.FinishedAt != nil {
		v.FinishedAt = st.FinishedAt.UTC().Format(time.RFC3339)
	}
	if st.NotBefore != nil {
		v.NotBefore = st.NotBefore.UTC().Format(time.RFC3339)
		v.Scheduled = st.State == wire.StateInProgress && !st.Paused && st.NotBefore.After(now)
	}
	if st.State == wire.StateFailed && st.FailedChunkIndex != nil && st.Error != nil {
		idx := *st.FailedChunkIndex
		v.Failure = &wire.Failure{ChunkIndex: &idx, Error: *st.Error}
	}
	if d := st.Dependencies; d != nil {
		v.AfterPolicy = d.Policy
		for _, id := range d.After {
			v.Parents = append(v.Parents, familyLink{ID: strconv.FormatInt(id, 10)})
		}
		for _, id := range d.WaitingOn {
			v.WaitingOn = append(v.WaitingOn, familyLink{ID: strconv.FormatInt(id, 10), State: string(wire.StateInProgress)})
		}
		if st.State == wire.StateCancelled && d.Failure != "" {
			v.Failure = &wire.Failure{Error: d.Failure} // "parent 123 failed"
		}
	}
	return v
}

// listView is the submissions page.
type listView struct {
	State, Tenant, Key, Value, After string
	States                           []wire.State
	Rows                             []submissionView
	Next                             string
	Error                            string
	Bulk                             []bulkButton // the buttons that act on the page's submissions
	Notice                           string       // what the last bulk action did
}

// listFilter reads the list's filter and page from get (the query or the form), and the
// options to list them with; v.Error says what is wrong with them.
func listFilter(get func(string) string) (v listView, opts queuer.ListOptions) {
	v = listView{State: get("state"), Tenant: get("tenant"), Key: get("key"), Value: get("value"), After: get("after"), States: wire.ListStates()}
	opts = queuer.ListOptions{Limit: pageSize}
	switch st := wire.State(v.State); st {
	case wire.ListRunning, wire.ListPaused, wire.ListScheduled: // in progress, by phase
		opts.State, opts.Phase = wire.StateInProgress, v.State
	default:
		if v.State != "" && !slices.Contains(wire.States(), st) {
			v.Error = "state: must be one of in_progress, running, paused, scheduled, completed, failed, cancelled"
		}
		opts.State = st
	}
	if v.Tenant != "" {
		if err := queuer.CheckTenant(v.Tenant); err != nil {
			v.Error = "tenant: " + err.Error()
		}
		opts.Tenant = v.Tenant
	}
	if v.Key != "" {
		if strings.ContainsRune(v.Key+v.Value, 0) || !utf8.ValidString(v.Key+v.Value) {
			v.Error = "key and value: must be UTF-8 text without NUL characters"
		}
		opts.Key, opts.Value = v.Key, metadataValue(v.Value)
	}
	if v.After != "" {
		id, err := strconv.ParseInt(v.After, 10, 64)
		if err != nil || id <= 0 {
			v.Error = "after: not a submission id"
		}
		opts.After = id
	}
	return v, opts
}

// listPage reads the page of the list that opts select into v.
func (d *dashboard) listPage(ctx context.Context, v *listView, opts queuer.ListOptions) error {
	list, more, err := d.q.List(ctx, opts)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, st := range list {
		v.Rows = append(v.Rows, toView(st, now))
	}
	if more {
		v.Next = v.Rows[len(v.Rows)-1].ID
	}
	return nil
}

func (d *dashboard) submissions(c echo.Context) error {
	v, opts := listFilter(c.QueryParam)
	if v.Error == "" {
		if err := d.listPage(c.Request().Context(), &v, opts); err != nil {
			return err
		}
		v.Bulk = bulkButtons(v.Rows)
		v.Notice = doneNotice(c.QueryParam("done"), c.QueryParam("n"), c.QueryParam("of"))
	}
	return d.render(c, http.StatusOK, "submissions", page{Title: "Submissions", Nav: "submissions", Live: "submissions", Data: v})
}

// progressView is a submission's progress, for the pages' scripts.
type progressView struct {
	ID            string     `json:"id"`
	State         wire.State `json:"state"`
	ChunksTotal   int64      `json:"chunks_total"`
	ChunksDone    int64      `json:"chunks_done"`
	ChunksFailed  int64      `json:"chunks_failed"`
	ChunksSkipped int64      `json:"chunks_skipped"`
	Paused        bool       `json:"paused"`
	Scheduled     bool       `json:"scheduled"`
	FinishedAt    string     `json:"finished_at"`
	Actions       []string   `json:"actions"` // the actions that apply now (actionsOf)
}

func toProgress(st queuer.Status) progressView {
	v := toView(st, time.Now())
	return progressView{ID: v.ID, State: v.State, ChunksTotal: v.Total, ChunksDone: v.Done, ChunksFailed: v.Failed,
		ChunksSkipped: v.Skipped, Paused: v.Paused, Scheduled: v.Scheduled, FinishedAt: v.FinishedAt, Actions: actionsOf(v)}
}

// submissionsJSON answers the progress of the submissions of a page of the list (the same
// query parameters).
func (d *dashboard) submissionsJSON(c echo.Context) error {
	v, opts := listFilter(c.QueryParam)
	if v.Error != "" {
		return c.JSON(http.StatusBadRequest, wire.ErrorBody{Error: wire.ErrorDetail{Code: "bad_request", Message: v.Error}})
	}
	list, _, err := d.q.List(c.Request().Context(), opts)
	if err != nil {
		return err
	}
	out := make([]progressView, len(list))
	for i, st := range list {
		out[i] = toProgress(st)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

// progress answers one submission's progress.
func (d *dashboard) progress(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return c.JSON(http.StatusBadRequest, wire.ErrorBody{Error: wire.ErrorDetail{Code: "bad_request", Message: "id: not a submission id"}})
	}
	st, err := d.q.Status(c.Request().Context(), id)
	if notFound(err) {
		return c.JSON(http.StatusNotFound, wire.ErrorBody{Error: wire.ErrorDetail{Code: "not_found", Message: "id: no such submission"}})
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, toProgress(st))
}

// metadataValue reads a value as GET /v1/submissions does: an integer when it is one, a
// quoted JSON string as that string, else the text itself.
func metadataValue(v string) json.RawMessage {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return json.RawMessage(strconv.FormatInt(n, 10))
	}
	var s string
	if err := json.Unmarshal([]byte(v), &s); err == nil {
		v = s
	}
	b, _ := json.Marshal(v)
	return b
}

// lookup reads the submission the path names. With ok false, the answer is an error page
// already written (err is what writing it returned) or err is the failure to answer.
func (d *dashboard) lookup(c echo.Context) (st queuer.Status, ok bool, err error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return st, false, d.fail(c, http.StatusBadRequest, "%q is not a submission id", c.Param("id"))
	}
	st, err = d.q.Status(c.Request().Context(), id)
	if notFound(err) {
		return st, false, d.fail(c, http.StatusNotFound, "no submission %d (it may have been deleted after the retention period)", id)
	}
	return st, err == nil, err
}

// detailView is a submission's page.
type detailView struct {
	submissionView
	Actions  []submissionAction // the lifecycle's buttons, each shown when it applies
	Applies  map[string]bool    // by action name, Cancel included
	Failures []failureView      // a page of its failed chunks
	After    string             // the chunk index the page of failures starts after; "" first
	Next     string             // the after of the next page of failures; "" for none
	// Children are its first childrenShown children (sent after it), by id, of Total
	// (counted up to childrenCounted).
	Children      []familyLink
	ChildrenTotal int64
}

// The children a submission's page lists, and up to how many it counts.
const (
	childrenShown   = 100
	childrenCounted = 10_000
)

func (d *dashboard) submission(c echo.Context) error {
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	after := int64(-1)
	if a := c.QueryParam("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			return d.fail(c, http.StatusBadRequest, "after: %q is not a chunk index", cut(a, 40))
		}
	}
	ctx := c.Request().Context()
	v := detailView{submissionView: toView(st, time.Now()), Actions: submissionActions, Applies: map[string]bool{}}
	for _, a := range actionsOf(v.submissionView) {
		v.Applies[a] = true
	}
	if v.Retries, err = d.q.Retries(ctx, st.ID); err != nil {
		return err
	}
	for i, p := range v.Parents { // each parent's state: at most 100 parents, each a router read
		id, _ := strconv.ParseInt(p.ID, 10, 64)
		ps, err := d.q.Status(ctx, id)
		switch {
		case notFound(err):
			v.Parents[i].State = "deleted"
		case err != nil:
			return err
		default:
			v.Parents[i].State = string(ps.State)
		}
	}
	kids, total, err := d.q.Children(ctx, st.ID, childrenShown, childrenCounted)
	if err != nil {
		return err
	}
	for _, k := range kids {
		v.Children = append(v.Children, familyLink{ID: strconv.FormatInt(k.ID, 10), State: k.State})
	}
	v.ChildrenTotal = total
	fcs, more, err := d.q.Failures(ctx, st.ID, after, failuresPageSize)
	if err != nil && !notFound(err) { // deleted since the lookup: the page says what it read
		return err
	}
	v.Failures = toFailures(fcs)
	if after >= 0 {
		v.After = strconv.FormatInt(after, 10)
	}
	if more {
		v.Next = strconv.FormatInt(fcs[len(fcs)-1].ChunkIndex, 10)
	}
	return d.render(c, http.StatusOK, "submission", page{Title: "Submission " + v.ID, Nav: "submissions", Live: "submission", Data: v})
}

// confirmView is the confirmation page of an action.
type confirmView struct {
	Question string
	Action   string // where the form posts
	Fields   map[string]string
	Back     string
}

func (d *dashboard) confirmCancel(c echo.Context) error {
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	id := strconv.FormatInt(st.ID, 10)
	return d.render(c, http.StatusOK, "confirm", page{Title: "Cancel submission " + id, Nav: "submissions", Data: confirmView{
		Question: "Cancel submission " + id + "? Its chunks not done yet are deleted; this cannot be undone.",
		Action:   "/ui/submissions/" + id + "/cancel", Back: "/ui/submissions/" + id,
	}})
}

func (d *dashboard) cancel(c echo.Context) error {
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	if _, err := d.q.Cancel(c.Request().Context(), st.ID); err != nil {
		if errors.Is(err, queuer.ErrFinished) {
			return d.fail(c, http.StatusConflict, "submission %d is already finished", st.ID)
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/ui/submissions/"+strconv.FormatInt(st.ID, 10))
}
