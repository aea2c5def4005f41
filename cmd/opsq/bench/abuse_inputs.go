package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"opsq/api/apikeys"
	"opsq/api/wire"
	"opsq/cmd/opsq/progress"
)

// The hostile inputs of the abuse workload: requests that break a bound of DESIGN.md §3 or
// §8, sent once each, one after the other, each answered as the design says. They come in
// families, each in its own file: bounds pushed past their limits (abuse_bounds.go),
// requests without a valid API key (abuse_auth.go) and the big reserves
// (abuse_reserve.go). This file sends them, and reports how each was answered.

// hostileInputsCase is the case of the hostile inputs: it prepares the chunks whose tokens
// the hostile fails use and the big backlog, sends the requests, and reports each.
func (a *abuseRun) hostileInputsCase() abuseCase {
	var tokens []string
	return abuseCase{
		prepare: func(ctx context.Context) ([]string, error) {
			targetID, targets, err := a.prepareTargets(ctx)
			if err != nil {
				return nil, err
			}
			tokens = targets
			bigIDs, err := a.prepareBig(ctx)
			if err != nil {
				return nil, err
			}
			return append(bigIDs, targetID), nil
		},
		run:    func(ctx context.Context) { a.hostileInputs(ctx, tokens) },
		report: a.reportHostileInputs,
	}
}

// hostileRequest is one request that breaks a bound of DESIGN.md §3 or §8, and the status
// the design gives it.
type hostileRequest struct {
	name    string
	want    int
	method  string
	path    string
	ctype   string
	body    []byte
	timeout time.Duration
	// The API key it carries: its route's (keys.go), unless noKey (none), forgedKey (one
	// no instance knows) or asRole (that role's) says otherwise.
	noKey, forgedKey bool
	asRole           apikeys.Role
	header           map[string]string // more headers
	// answer, if set, reads the answer's body (else it is discarded); it returns a note.
	answer func(body io.Reader) string
}

// hostileRequests lists the hostile inputs: every bound pushed past its limit, and with
// keys (OPSQ_AUTH=required) requests without a valid key, with a key of the wrong role,
// and marked forwarded without a signature. tokens are live reservations the fails may use.
// The reserve of max bigMax over big chunks comes last, twice.
func hostileRequests(tokens []string, bigMax, keyCount int, chunkCountTimeout time.Duration, withKeys bool) []hostileRequest {
	reqs := boundRequests(tokens, keyCount, chunkCountTimeout)
	if withKeys {
		reqs = append(reqs, authRequests()...)
	}
	big := bigReserve(bigMax)
	return append(reqs, big, big)
}

// hostileRequests is hostileRequests with the sizes of the configuration: a request of
// chunk_count 100 000 001 is given at most 10 s, and less in a run shorter than that.
func (a *abuseRun) hostileRequests(tokens []string) []hostileRequest {
	cfg := a.r.cfg
	return hostileRequests(tokens, min(10_000, cfg.AbuseBigChunks), cfg.AbuseKeys, min(10*time.Second, cfg.AbuseDuration), len(a.r.env.keys) > 0)
}

// mustJSON marshals v, one of the values of the hostile requests, which always marshal.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the values of the hostile requests always marshal
	}
	return b
}

// abuseTagged is the strategic metadata of a hostile submission: the abuse tag, with name,
// by which the report finds the submission if it was created.
func abuseTagged(name string) map[string]any { return map[string]any{abuseTag: name} }

// postJSON is a hostile POST of body, JSON, to path, which the design answers with want.
func postJSON(name, path string, want int, body []byte) hostileRequest {
	return hostileRequest{name: name, want: want, method: http.MethodPost, path: path, ctype: "application/json", body: body}
}

// hostileInputs sends each hostile request once (the big reserve once per instance,
// alternating), recording each answer, and cancels any submission one of them created.
func (a *abuseRun) hostileInputs(ctx context.Context, tokens []string) {
	reqs := a.hostileRequests(tokens)
	for i, hr := range reqs {
		if ctx.Err() != nil {
			return
		}
		inst := a.r.env.instances[i%len(a.r.env.instances)]
		timeout := cmp.Or(hr.timeout, abuseRequestTimeout)
		rctx, cancel := context.WithTimeout(ctx, timeout)
		req, _ := http.NewRequestWithContext(rctx, hr.method, inst.url+hr.path, bytes.NewReader(hr.body))
		req.Header.Set("Content-Type", hr.ctype)
		for k, v := range hr.header {
			req.Header.Set(k, v)
		}
		hc := a.hc // adds the route's key
		switch {
		case hr.noKey:
			hc = a.hcNoKey
		case hr.forgedKey:
			req.Header.Set("Authorization", "Bearer "+apikeys.Generate())
		case hr.asRole != "":
			req.Header.Set("Authorization", "Bearer "+a.r.env.keys[hr.asRole])
		}
		started := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			what := "error"
			if errors.Is(err, context.DeadlineExceeded) {
				what = "timeout " + timeout.String()
			}
			a.answered(hr.name, what)
			a.note(hr.name, "%s", err)
			continue
		}
		a.answered(hr.name, strconv.Itoa(resp.StatusCode))
		if hr.answer != nil {
			a.note(hr.name, "%s in %s", hr.answer(resp.Body), progress.Duration(time.Since(started)))
		} else {
			a.note(hr.name, "answered in %s", progress.Duration(time.Since(started)))
			var created wire.Created
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode/100 == 2 && json.Unmarshal(body, &created) == nil && created.ID != "" {
				a.mu.Lock()
				a.mu.created[created.ID] = hr.name
				a.mu.Unlock()
				a.r.discard(ctx, created.ID) // keep the cluster clean for the rest of the run
			}
		}
		resp.Body.Close()
		cancel()
	}
}

// reportHostileInputs adds a row for each hostile request sent (one for the big reserve,
// sent twice): its answers other than the design's.
func (a *abuseRun) reportHostileInputs() {
	reported := map[string]bool{}
	for _, hr := range a.hostileRequests([]string{"t"}) {
		if reported[hr.name] {
			continue
		}
		reported[hr.name] = true
		want := strconv.Itoa(hr.want)
		designed := func(status string) bool {
			// A submission refused with 503 busy (the ingest slots were full of stalled
			// uploads) is refused too, and created nothing: the designed answer then.
			return status == want || hr.path == "/v1/submissions" && status == "503"
		}
		label := want
		if hr.path == "/v1/submissions" {
			label += " or 503 busy"
		}
		a.reportAnswers(hr.name, label, designed)
	}
}
