package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

// The failure lifecycle on the pages (DESIGN.md §3 and §9): a submission's failed chunks,
// and the buttons that retry, pause and resume one submission or the submissions of a page
// of the list. Like Cancel, each button leads to a confirmation page whose form POSTs
// (sameOrigin checks it), and the dashboard calls the engine directly.

const (
	// failuresPageSize is the failed chunks on one page of a submission: each holds at most
	// 5 errors of at most 8 KiB (the engine's bounds), so a page holds at most 2 MiB of them.
	failuresPageSize = 50
	// errorShown is how much of an error a row shows; the whole is in its details element.
	errorShown = 300
)

// failureView is a failed chunk's row, and its JSON for the page's script.
type failureView struct {
	Index   int64         `json:"index"`
	State   string        `json:"state"` // failed (its attempts spent), skipped, retrying or completed
	Retries int64         `json:"retries"`
	Last    string        `json:"last"` // the newest error, cut to errorShown
	Errors  []attemptView `json:"errors"`
}

// attemptView is one failed attempt of a failed chunk.
type attemptView struct {
	Error    string `json:"error"`
	Consumer string `json:"consumer"`
	At       string `json:"at"`
}

// failuresJSON answers the page of a submission's failed chunks that its page shows (the
// same after), for the page's script: the table refreshes like the progress bar.
func (d *dashboard) failuresJSON(c echo.Context) error {
	bad := func(msg string) error {
		return c.JSON(http.StatusBadRequest, wire.ErrorBody{Error: wire.ErrorDetail{Code: "bad_request", Message: msg}})
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return bad("id: not a submission id")
	}
	after := int64(-1)
	if a := c.QueryParam("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			return bad("after: not a chunk index")
		}
	}
	fcs, more, err := d.q.Failures(c.Request().Context(), id, after, failuresPageSize)
	if notFound(err) {
		return c.JSON(http.StatusNotFound, wire.ErrorBody{Error: wire.ErrorDetail{Code: "not_found", Message: "id: no such submission"}})
	}
	if err != nil {
		return err
	}
	out := struct {
		Failures []failureView `json:"failures"`
		Next     string        `json:"next"` // the after of the next page; "" for none
	}{Failures: toFailures(fcs)}
	if more {
		out.Next = strconv.FormatInt(fcs[len(fcs)-1].ChunkIndex, 10)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

func toFailures(fcs []queuer.FailedChunk) []failureView {
	out := make([]failureView, len(fcs))
	for i, fc := range fcs {
		v := failureView{Index: fc.ChunkIndex, State: fc.State, Retries: fc.Retries, Errors: make([]attemptView, len(fc.Errors))}
		for j, e := range fc.Errors {
			v.Errors[j] = attemptView{Error: e.Error, Consumer: e.Consumer, At: e.At.UTC().Format(time.RFC3339)}
		}
		if len(fc.Errors) > 0 {
			v.Last = cut(fc.Errors[0].Error, errorShown)
		}
		out[i] = v
	}
	return out
}

// cut shortens s to at most n bytes, on a rune boundary, and marks the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// policyText says a failure policy (on_failure, as the producer gave it) in words.
func policyText(raw json.RawMessage) string {
	var name string
	if len(raw) == 0 || json.Unmarshal(raw, &name) == nil {
		switch name {
		case "", "fail_submission":
			return "fail_submission: the first chunk to fail fails the submission and skips the rest"
		case "continue":
			return "continue: failed chunks stay failed, the others go on"
		}
		return name
	}
	var after struct {
		FailAfter struct {
			Chunks   *int64   `json:"chunks"`
			Fraction *float64 `json:"fraction"`
		} `json:"fail_after"`
	}
	if json.Unmarshal(raw, &after) == nil {
		switch f := after.FailAfter; {
		case f.Chunks != nil:
			return fmt.Sprintf("fail after more than %s failed chunks", num(*f.Chunks))
		case f.Fraction != nil:
			return fmt.Sprintf("fail after more than %s %% of the chunks failed", strconv.FormatFloat(100**f.Fraction, 'f', -1, 64))
		}
	}
	return string(raw)
}

// num writes n with its thousands separated by no-break spaces, as the CLI does with
// spaces: "1 234 567".
func num(n int64) string { return wire.GroupDigits(n, "\u00a0") }

// numAny is num for the templates, for any integer they hold.
func numAny(v any) string {
	switch n := v.(type) {
	case int:
		return num(int64(n))
	case int32:
		return num(int64(n))
	case int64:
		return num(n)
	}
	return fmt.Sprint(v)
}

// A submission action: a button of the submission page, and of the list for many.
type submissionAction struct {
	Name     string
	Label    string
	question string // with the submission's id
	many     string // the list's button, with how many submissions of the page it acts on
	applies  func(st submissionView) bool
}

// submissionActions are the lifecycle's buttons, in the order the pages show them (Cancel
// has its own, older routes).
var submissionActions = []submissionAction{
	{Name: "retry", Label: "Retry failed",
		question: "Retry the failed chunks of submission %s? They get a fresh attempt budget and are handed out again; completed outputs stay.",
		many:     "Retry failed (%d on this page)",
		applies: func(v submissionView) bool {
			return (v.State == wire.StateFailed || v.State == wire.StateInProgress) && v.Failed > 0
		}},
	{Name: "retry_unfinished", Label: "Retry unfinished",
		question: "Retry the failed and skipped chunks of submission %s? They get a fresh attempt budget and are handed out again; completed outputs stay.",
		applies: func(v submissionView) bool {
			return (v.State == wire.StateFailed && v.Skipped > 0) || (v.State == wire.StateCancelled && v.Failed+v.Skipped > 0)
		}},
	{Name: "pause", Label: "Pause",
		question: "Pause submission %s? None of its chunks is handed out until it is resumed; those in flight finish as usual.",
		many:     "Pause all (%d on this page)",
		applies:  func(v submissionView) bool { return v.State == wire.StateInProgress && !v.Paused }},
	{Name: "resume", Label: "Resume",
		question: "Resume submission %s? Its chunks are handed out again at once.",
		many:     "Resume all (%d on this page)",
		applies:  func(v submissionView) bool { return v.State == wire.StateInProgress && v.Paused }},
}

func findAction(name string) (submissionAction, bool) {
	for _, a := range submissionActions {
		if a.Name == name {
			return a, true
		}
	}
	return submissionAction{}, false
}

// actionsOf names the actions that apply to v, Cancel included.
func actionsOf(v submissionView) []string {
	out := []string{}
	for _, a := range submissionActions {
		if a.applies(v) {
			out = append(out, a.Name)
		}
	}
	if v.State == wire.StateInProgress {
		out = append(out, "cancel")
	}
	return out
}

// act does action name to submission id.
func (d *dashboard) act(ctx context.Context, name string, id int64) error {
	s := d.q
	var err error
	switch name {
	case "retry":
		_, err = s.Retry(ctx, id, queuer.RetryOptions{})
	case "retry_unfinished":
		_, err = s.Retry(ctx, id, queuer.RetryOptions{Unfinished: true})
	case "pause":
		_, err = s.Pause(ctx, id)
	case "resume":
		_, err = s.Resume(ctx, id)
	default:
		err = fmt.Errorf("no action %q", name)
	}
	return err
}

// conflict is err when it says the action does not apply (any more) to the submission.
func conflict(err error) bool {
	return errors.Is(err, queuer.ErrNothingToRetry) || errors.Is(err, queuer.ErrFinished)
}

const actionNames = "retry, retry_unfinished, pause or resume"

func (d *dashboard) confirmSubmission(c echo.Context) error {
	a, ok := findAction(c.QueryParam("action"))
	if !ok {
		return d.fail(c, http.StatusBadRequest, "action: must be %s", actionNames)
	}
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	id := strconv.FormatInt(st.ID, 10)
	return d.render(c, http.StatusOK, "confirm", page{Title: a.Label + ": submission " + id, Nav: "submissions", Data: confirmView{
		Question: fmt.Sprintf(a.question, id), Action: "/ui/submissions/" + id + "/action",
		Fields: map[string]string{"action": a.Name}, Back: "/ui/submissions/" + id,
	}})
}

func (d *dashboard) submissionAction(c echo.Context) error {
	a, ok := findAction(c.FormValue("action"))
	if !ok {
		return d.fail(c, http.StatusBadRequest, "action: must be %s", actionNames)
	}
	st, ok, err := d.lookup(c)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	switch err := d.act(ctx, a.Name, st.ID); {
	case errors.Is(err, queuer.ErrNothingToRetry):
		return d.fail(c, http.StatusConflict, "submission %d has nothing to retry", st.ID)
	case errors.Is(err, queuer.ErrFinished):
		return d.fail(c, http.StatusConflict, "submission %d is already finished", st.ID)
	case notFound(err):
		return d.fail(c, http.StatusNotFound, "no submission %d", st.ID)
	case err != nil:
		return err
	}
	d.log.InfoContext(ctx, "dashboard action", "action", a.Name, "submission_id", st.ID)
	return c.Redirect(http.StatusSeeOther, "/ui/submissions/"+strconv.FormatInt(st.ID, 10))
}

// bulkButton is a button of the list that acts on the submissions of the page shown.
type bulkButton struct {
	Name, Label string
}

// bulkButtons are the list's buttons for the rows of a page.
func bulkButtons(rows []submissionView) []bulkButton {
	var out []bulkButton
	for _, a := range submissionActions {
		if a.many == "" {
			continue
		}
		if n := len(applying(a, rows)); n > 0 {
			out = append(out, bulkButton{Name: a.Name, Label: fmt.Sprintf(a.many, n)})
		}
	}
	return out
}

// applying are the ids of the rows that a applies to.
func applying(a submissionAction, rows []submissionView) []string {
	var ids []string
	for _, r := range rows {
		if a.applies(r) {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// confirmMany asks to act on the submissions of a page of the list (the same filter and
// page): at most pageSize of them, named in the form, so that the POST acts on exactly
// those the operator was shown, not on whatever the filter selects by then.
func (d *dashboard) confirmMany(c echo.Context) error {
	a, ok := findAction(c.QueryParam("action"))
	if !ok || a.many == "" {
		return d.fail(c, http.StatusBadRequest, "action: must be retry, pause or resume")
	}
	v, opts := listFilter(c.QueryParam)
	if v.Error != "" {
		return d.fail(c, http.StatusBadRequest, "%s", v.Error)
	}
	if err := d.listPage(c.Request().Context(), &v, opts); err != nil {
		return err
	}
	back := "/ui/submissions?" + v.values().Encode()
	ids := applying(a, v.Rows)
	if len(ids) == 0 {
		return d.render(c, http.StatusOK, "confirm", page{Title: a.Label, Nav: "submissions", Data: confirmView{
			Question: "No submission on this page to " + strings.ToLower(a.Label) + ".", Back: back,
		}})
	}
	fields := map[string]string{"action": a.Name, "ids": strings.Join(ids, ",")}
	for k := range v.values() {
		fields[k] = v.values().Get(k)
	}
	return d.render(c, http.StatusOK, "confirm", page{Title: a.Label, Nav: "submissions", Data: confirmView{
		Question: fmt.Sprintf("%s: %d submissions of this page (%s)? %s", a.Label, len(ids), v.describe(), strings.Join(ids, ", ")),
		Action:   "/ui/submissions/action", Fields: fields, Back: back,
	}})
}

// actMany acts on the submissions confirmMany named, each on its own (as the engine's
// RetryMany does): those it no longer applies to are counted, not an error.
func (d *dashboard) actMany(c echo.Context) error {
	a, ok := findAction(c.FormValue("action"))
	if !ok || a.many == "" {
		return d.fail(c, http.StatusBadRequest, "action: must be retry, pause or resume")
	}
	ids, err := parseIDs(c.FormValue("ids"))
	if err != nil {
		return d.fail(c, http.StatusBadRequest, "%s", err)
	}
	ctx := c.Request().Context()
	var n int
	for _, id := range ids {
		switch err := d.act(ctx, a.Name, id); {
		case conflict(err), notFound(err):
		case err != nil:
			return err
		default:
			n++
		}
	}
	d.log.InfoContext(ctx, "dashboard action", "action", a.Name, "submissions", len(ids), "acted_on", n)
	v, _ := listFilter(c.FormValue)
	q := v.values()
	q.Set("done", a.Name)
	q.Set("n", strconv.Itoa(n))
	q.Set("of", strconv.Itoa(len(ids)))
	return c.Redirect(http.StatusSeeOther, "/ui/submissions?"+q.Encode())
}

// parseIDs reads the comma-separated submission ids of a form: 1 to pageSize of them.
func parseIDs(s string) ([]int64, error) {
	parts := strings.Split(s, ",")
	if s == "" || len(parts) > pageSize {
		return nil, fmt.Errorf("ids: 1 to %d submission ids are required", pageSize)
	}
	ids := make([]int64, len(parts))
	for i, p := range parts {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("ids: %q is not a submission id", cut(p, 40))
		}
		ids[i] = id
	}
	return ids, nil
}

// doneNotice is what the list says after a bulk action (its done, n and of parameters);
// "" when they say nothing valid.
func doneNotice(done, n, of string) string {
	a, ok := findAction(done)
	acted, err1 := strconv.Atoi(n)
	total, err2 := strconv.Atoi(of)
	if !ok || a.many == "" || err1 != nil || err2 != nil || acted < 0 || total < acted || total > pageSize {
		return ""
	}
	verb := map[string]string{"retry": "Retried", "pause": "Paused", "resume": "Resumed"}[a.Name]
	msg := fmt.Sprintf("%s %d of %d submissions.", verb, acted, total)
	if acted < total {
		msg += " The others no longer needed it (or were finished meanwhile)."
	}
	return msg
}

// values are the filter and page of the list as query parameters.
func (v listView) values() url.Values {
	u := url.Values{}
	for k, val := range map[string]string{"state": v.State, "tenant": v.Tenant, "key": v.Key, "value": v.Value, "after": v.After} {
		if val != "" {
			u.Set(k, val)
		}
	}
	return u
}

// describe says the filter in words.
func (v listView) describe() string {
	var parts []string
	if v.State != "" {
		parts = append(parts, "state "+v.State)
	}
	if v.Tenant != "" {
		parts = append(parts, "tenant "+v.Tenant)
	}
	if v.Key != "" {
		parts = append(parts, v.Key+" = "+v.Value)
	}
	if v.After != "" {
		parts = append(parts, "after "+v.After)
	}
	if len(parts) == 0 {
		return "no filter"
	}
	return strings.Join(parts, ", ")
}
