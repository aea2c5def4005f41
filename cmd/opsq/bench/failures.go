package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
)

// The failures workload of "opsq bench" (DESIGN.md §6, "Failure"), and the submissions
// with lifecycle fields (DESIGN.md §3) that it and the latency workload's waiting chunks
// make.

// Targets of DESIGN.md §6's failure line.
const (
	failureRateTarget   = 0.90 // the failing burn-down's rate over the clean one's, at least
	failureRateDesign   = 0.01 // the share of failed attempts the target is for
	waitingP50Target    = 1.5  // reserve p50 beside waiting chunks over the same without, at most
	waitingNotBeforeFor = "24h"
)

// failuresHeader is the header of both submissions of the failures workload: a chunk whose
// attempts are spent fails alone, and a retried chunk is reservable again at once.
func failuresHeader() wire.SubmissionHeader {
	return wire.SubmissionHeader{OnFailure: wire.OnFailureContinue, RetryBackoff: &wire.RetryBackoff{Initial: "0s"}}
}

// failures burns down a submission of --failure-chunks chunks whose consumers fail
// --failure-rate of their attempts (retry true) and complete the rest, then a second one of
// as many chunks that they complete at once, with the burndown's consumers (burnDown), and
// compares the two rates: chunks finished (completed, or failed for good) per second.
func (r *benchRun) failures(ctx context.Context) error {
	n, rate := r.cfg.FailureChunks, r.cfg.FailureRate
	type run struct {
		key, label string
		failRate   float64
		b          *burndown
	}
	runs := []*run{
		{key: "failures.", label: "failures", failRate: rate},
		{key: "failures.clean_", label: "failures, clean", failRate: 0},
	}
	for _, u := range runs {
		created, err := r.submitLifecycle(ctx, r.env.clients[0], n, u.label+" backlog", failuresHeader())
		if err != nil {
			return err
		}
		b, err := r.burnDown(ctx, u.label, created.ID, n, u.failRate)
		if err == nil {
			_, err = r.checkBurnDown(ctx, b)
		}
		r.discard(ctx, created.ID)
		if err != nil {
			return fmt.Errorf("%s: %w", u.label, err)
		}
		u.b = b
		took := b.end.Sub(b.start)
		r.say("%s: %s chunks in %s (%s chunks/s), %s attempts failed, %s chunks failed for good, %d handed out while reserved",
			u.label, progress.GroupDigits(n), progress.Duration(took), progress.GroupDigits(progress.RoundSignificant(perSecond(n, took), 3)),
			progress.GroupDigits(b.failures.Load()), progress.GroupDigits(b.failed.Load()), b.twice.Load())
	}

	failing, clean := runs[0], runs[1]
	at := fmt.Sprintf("%s chunks, %d consumers, max %d, ", progress.GroupDigits(n), r.cfg.Consumers, r.cfg.Max)
	failingRate, cleanRate := perSecond(n, failing.b.end.Sub(failing.b.start)), perSecond(n, clean.b.end.Sub(clean.b.start))
	ratio := 0.0
	if cleanRate > 0 {
		ratio = failingRate / cleanRate
	}
	ratioRow := measured("failures.rate_ratio", "failing rate over clean rate", ratio, unitRatio)
	switch {
	case rate != failureRateDesign:
		ratioRow = ratioRow.note("the target, ≥ %g×, is for %g %% of attempts failed", failureRateTarget, failureRateDesign*100)
	default:
		ratioRow = ratioRow.want(">=", failureRateTarget)
	}
	failingRow := measured("failures.rate", at+fmt.Sprintf("%g %% of attempts failed", rate*100), failingRate, unitRate).
		note("chunks finished (completed, or failed for good) per second; on_failure continue, retry_backoff initial 0s")
	cleanRow := measured("failures.clean_rate", at+"none failed", cleanRate, unitRate).note("the same submission, its consumers failing nothing")
	r.report.add(failingRow, cleanRow, ratioRow,
		measured("failures.attempts_failed", "attempts failed (retry true)", float64(failing.b.failures.Load()), unitCount).
			note("of %s attempts", progress.GroupDigits(deliveriesOf(failing.b))),
		measured("failures.chunks_failed", "chunks failed for good (attempts spent)", float64(failing.b.failed.Load()), unitCount).
			note("the server's default_max_retries"),
		measured("failures.handed_out_twice", "chunks handed out while reserved, failing", float64(failing.b.twice.Load()), unitCount).want("==", 0),
		measured("failures.clean_handed_out_twice", "chunks handed out while reserved, clean", float64(clean.b.twice.Load()), unitCount).want("==", 0),
	)
	for _, u := range runs {
		if f := u.b.foreign.Load(); f > 0 {
			r.report.add(measured(u.key+"other_chunks", u.label+": chunks of other submissions", float64(f), unitCount).note("left over from earlier workloads"))
		}
	}
	return nil
}

// deliveriesOf returns how many chunks b handed out in all.
func deliveriesOf(b *burndown) int64 {
	var n int64
	for i := range b.deliveries {
		n += int64(b.deliveries[i].Load())
	}
	return n
}

// submitLifecycle is submitHeader for a submission with lifecycle fields, and checks that
// its status shows them (on_failure, not_before): a bench whose server ignored them would
// measure something else.
func (r *benchRun) submitLifecycle(ctx context.Context, c *client.Client, n int64, label string, h wire.SubmissionHeader) (wire.Created, error) {
	created, _, err := r.submitHeader(ctx, c, n, label, h)
	if err != nil {
		return created, err
	}
	st, err := c.Status(ctx, created.ID, 0)
	if err != nil {
		r.discard(ctx, created.ID)
		return created, fmt.Errorf("%s: reading its status: %w", label, err)
	}
	var ignored []string
	if h.OnFailure != nil && !sameJSON(st.OnFailure, h.OnFailure) {
		ignored = append(ignored, fmt.Sprintf("on_failure %s, the status says %s", h.OnFailure, st.OnFailure))
	}
	if h.NotBefore != "" && st.NotBefore == nil {
		ignored = append(ignored, fmt.Sprintf("not_before %q, the status has none", h.NotBefore))
	}
	if len(ignored) > 0 {
		r.discard(ctx, created.ID)
		return created, fmt.Errorf("%s: the server took but ignored %s", label, strings.Join(ignored, "; "))
	}
	return created, nil
}

// sameJSON reports whether a and b are the same JSON text but for white space.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// waitingChunks is a submission of chunks that wait (not_before a day ahead) beside a
// latency backlog: the reserves timed beside it must not hand out any of them.
type waitingChunks struct {
	id   string
	n    int64
	seen int64 // of its chunks handed out by the timed reserves
}

// addWaiting submits --waiting chunks with not_before a day ahead, through c.
func (r *benchRun) addWaiting(ctx context.Context, c *client.Client, size int64) (*waitingChunks, error) {
	n := r.cfg.Waiting
	label := fmt.Sprintf("latency: %s waiting chunks beside backlog %s", progress.GroupDigits(n), progress.GroupDigits(size))
	start := time.Now()
	created, err := r.submitLifecycle(ctx, c, n, label,
		wire.SubmissionHeader{NotBefore: waitingNotBeforeFor, StrategicMetadata: latencyMetadata})
	if err != nil {
		return nil, err
	}
	r.say("%s: submitted in %s", label, progress.Duration(time.Since(start)))
	return &waitingChunks{id: created.ID, n: n}, nil
}
