package bench

import (
	"context"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
)

// The burn-down of the abuse workload, which the attacks run beside: producers submit,
// consumers reserve and complete, and a ledger records every delivery and every answer, so
// that the report can tell a chunk lost, completed twice or completed by a forged token.
// The forged tokens (abuse_forged_tokens.go) are made from the ledger's recent tokens and
// submissions.

// produce submits a burn-down submission every abuseSubmitEvery until ctx ends.
func (a *abuseRun) produce(ctx context.Context) {
	t := time.NewTicker(abuseSubmitEvery)
	defer t.Stop()
	chunks := make([]string, abuseBurnChunks)
	for i := range chunks {
		chunks[i] = strconv.Itoa(i)
	}
	for i := 0; ; i++ {
		created, err := a.clients[i%len(a.clients)].Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
			StrategicMetadata: benchTagged("abuse-burndown")}, Chunks: chunks})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			id, _ := strconv.ParseInt(created.ID, 10, 64)
			a.ledger.addSubmission(id, created.ChunksTotal)
		} else {
			a.ledger.errors.Add(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// consume reserves and completes burn-down chunks until ctx ends; each completion's output
// is the chunk's token, so that the ledger can tell a completion of ours from a forger's.
func (a *abuseRun) consume(ctx context.Context, c *client.Client, name string) {
	req := wire.ReserveRequest{Max: 10, Strategy: strategyFor("abuse-burndown"), Lease: "5m", Wait: "1s", Consumer: name}
	for ctx.Err() == nil {
		chunks, err := c.Reserve(ctx, req)
		if err != nil {
			if ctx.Err() == nil {
				a.ledger.errors.Add(1)
				_ = clustertest.SleepCtx(ctx, 100*time.Millisecond)
			}
			continue
		}
		if len(chunks) == 0 {
			continue
		}
		comps := make([]wire.Completion, len(chunks))
		for i, ch := range chunks {
			a.ledger.deliver(ch)
			comps[i] = wire.Completion{Token: ch.Token, Output: ch.Token}
		}
		// A completion is retried until answered (repeating one is harmless), even once
		// ctx has ended, so that no chunk of ours is left half done.
		for attempt := 0; attempt < 20; attempt++ {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			results, err := c.Complete(cctx, comps...)
			cancel()
			if err == nil {
				for i, res := range results {
					a.ledger.answered(chunks[i], res.Status)
				}
				break
			}
			a.ledger.errors.Add(1)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// waitBurndown waits until every burn-down submission has finished, for up to
// abuseDrainTimeout, and reports whether they all did.
func (a *abuseRun) waitBurndown(ctx context.Context) bool {
	deadline := time.Now().Add(abuseDrainTimeout)
	for time.Now().Before(deadline) {
		ids := a.ledger.submissionIDs()
		var finished int
		err := a.db.QueryRow(ctx, `SELECT count(*) FROM opsq.submission_status WHERE id = ANY($1) AND state <> 'in_progress'`, ids).Scan(&finished)
		if err == nil && finished == len(ids) {
			return true
		}
		if clustertest.SleepCtx(ctx, 500*time.Millisecond) != nil {
			return false
		}
	}
	return false
}

// abuseLedger records the burn-down: its submissions, every delivery and every answer to
// our completions. Safe for concurrent use.
type abuseLedger struct {
	errors atomic.Int64 // requests of the burn-down that failed (retried)

	mu struct {
		sync.Mutex
		totals    map[int64]int64
		ids       []int64
		delivered map[abuseChunk][]string // the tokens each chunk was delivered with
		completed map[abuseChunk]int      // our completions answered "completed"
		recent    []string                // a ring of recent tokens, for the forger
		next      int
		count     int64
	}
}

type abuseChunk struct {
	sub int64
	idx int64
}

func newAbuseLedger() *abuseLedger {
	l := &abuseLedger{}
	l.mu.totals, l.mu.delivered, l.mu.completed = map[int64]int64{}, map[abuseChunk][]string{}, map[abuseChunk]int{}
	return l
}

func (l *abuseLedger) addSubmission(id, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.totals[id] = total
	l.mu.ids = append(l.mu.ids, id)
}

func (l *abuseLedger) submissionIDs() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.ids)
}

// randomSubmission returns one of the last few burn-down submissions and its size.
func (l *abuseLedger) randomSubmission() (int64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mu.ids) == 0 {
		return 0, 0
	}
	id := l.mu.ids[len(l.mu.ids)-1-mrand.IntN(min(len(l.mu.ids), 8))]
	return id, l.mu.totals[id]
}

func (l *abuseLedger) deliver(ch wire.ReservedChunk) {
	id, _ := strconv.ParseInt(ch.SubmissionID, 10, 64)
	k := abuseChunk{id, ch.ChunkIndex}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.delivered[k] = append(l.mu.delivered[k], ch.Token)
	const ring = 1024
	if len(l.mu.recent) < ring {
		l.mu.recent = append(l.mu.recent, ch.Token)
	} else {
		l.mu.recent[l.mu.next%ring] = ch.Token
	}
	l.mu.next++
}

func (l *abuseLedger) recentToken() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mu.recent) == 0 {
		return ""
	}
	return l.mu.recent[mrand.IntN(len(l.mu.recent))]
}

func (l *abuseLedger) answered(ch wire.ReservedChunk, status wire.TokenStatus) {
	if status != wire.StatusCompleted {
		return
	}
	id, _ := strconv.ParseInt(ch.SubmissionID, 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.completed[abuseChunk{id, ch.ChunkIndex}]++
	l.mu.count++
}

func (l *abuseLedger) completedCount() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.count
}

// abuseLedgerStats is the ledger's check against the database.
type abuseLedgerStats struct {
	submissions, subsCompleted, subsFailed, subsOpen int
	chunks                                           int64
	zero, twice, forged                              int64
}

// check compares the ledger with opsq.chunks_completed: every chunk of every burn-down
// submission completed once, with the output (the token) of one of its deliveries, and
// answered "completed" to one completion of ours.
func (l *abuseLedger) check(ctx context.Context, db *pgxpool.Pool) (abuseLedgerStats, error) {
	ids := l.submissionIDs()
	var st abuseLedgerStats
	st.submissions = len(ids)
	rows, err := db.Query(ctx, `SELECT state, count(*) FROM opsq.submission_status WHERE id = ANY($1) GROUP BY state`, ids)
	if err != nil {
		return st, err
	}
	var state wire.State
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		switch state {
		case wire.StateCompleted:
			st.subsCompleted += n
		case wire.StateFailed:
			st.subsFailed += n
		default:
			st.subsOpen += n
		}
		return nil
	}); err != nil {
		return st, err
	}
	done := map[abuseChunk]string{}
	rows, err = db.Query(ctx, `SELECT submission_id, chunk_index, output FROM opsq.chunks_completed WHERE submission_id = ANY($1)`, ids)
	if err != nil {
		return st, err
	}
	var k abuseChunk
	var output []byte
	if _, err := pgx.ForEachRow(rows, []any{&k.sub, &k.idx, &output}, func() error {
		if _, dup := done[k]; dup {
			st.twice++
		}
		done[k] = string(output)
		return nil
	}); err != nil {
		return st, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		for idx := range l.mu.totals[id] {
			st.chunks++
			k := abuseChunk{id, idx}
			out, ok := done[k]
			switch {
			case !ok:
				st.zero++
			case !slices.Contains(l.mu.delivered[k], out):
				st.forged++
			case l.mu.completed[k] > 1:
				st.twice++
			}
		}
	}
	return st, nil
}
