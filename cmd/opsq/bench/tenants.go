package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"opsq/api/apikeys"
	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/cmd/opsq/progress"
)

// The tenants workload of "opsq bench", DESIGN.md §6: "a consumer limited to 1 of 100
// tenants, over a 10⁷-chunk backlog spread evenly, reserves with p50 within 2× of an
// unlimited one". The in-process test TestTenantReserveCost (queuer/internal/handout) measures the
// confinement alone; this measures it as a consumer sees it, over HTTP, through a key.

const (
	// tenantCount is how many tenants the backlog is spread over, one submission each.
	tenantCount = 100
	// tenantLimited is the one tenant the limited consumer's key may reserve from.
	tenantLimited = "t17"
	// tenantP50Target: the limited consumer's p50 over the unlimited one's, at most.
	tenantP50Target = 2
	// tenantInsertParallel is how many of the submissions are inserted at once, each
	// through instance i % --instances: below the instances' ingest slots (8 each).
	tenantInsertParallel = 4
	// tenantKeyName names the limited consumer's key.
	tenantKeyName = benchKeyPrefix + "consumer-" + tenantLimited
	// tenantKeyWait is how long the bench waits for instance 0 to know the limited key.
	tenantKeyWait = 10 * time.Second
)

// tenantName is the name of tenant i of the backlog: t0 … t99.
func tenantName(i int) string { return "t" + strconv.Itoa(i) }

// tenants inserts --tenant-chunks object-storage chunks spread evenly over tenantCount
// tenants, one submission each (submitted with the admin key, naming its tenant), then
// times --samples reserves (max 1, random) of two consumers through instance 0, in turn:
// one with the bench's consumer key (every tenant) and one with a key limited to
// tenantLimited. Each reserve is followed by an untimed complete of the chunk through the
// same consumer. A chunk handed to the limited consumer from another tenant is a
// violation: something broken.
func (r *benchRun) tenants(ctx context.Context) error {
	// Made before the backlog, so that every instance has heard of the key by the time it
	// is used; waitKnown checks it anyway.
	limitedKey, err := r.limitedConsumerKey(ctx)
	if err != nil {
		return err
	}
	tenantOf, took, err := r.insertTenants(ctx)
	for id := range tenantOf {
		defer r.discard(ctx, id)
	}
	if err != nil {
		return err
	}
	n := r.cfg.TenantChunks
	r.say("tenants: inserted %s chunks over %d tenants (one object-storage submission each) in %s",
		progress.GroupDigits(n), tenantCount, progress.Duration(took))
	if r.cfg.Vacuum {
		if err := r.vacuumChunks(ctx, "tenants"); err != nil {
			return err
		}
	}

	limited := client.New(r.env.instances[0].url, client.WithKey(limitedKey), client.WithUserAgent("opsq-bench"))
	if err := waitKnown(ctx, limited); err != nil {
		return err
	}
	t, err := r.timeTenants(ctx, r.env.clients[0], limited, tenantOf)
	if err != nil {
		return err
	}

	r.line.Show("tenants: cancelling the submissions")
	for id := range tenantOf {
		if _, err := r.cancel(ctx, id); err != nil {
			return err
		}
	}

	all, one := summarize(t.unlimited), summarize(t.limited)
	at := fmt.Sprintf("%s chunks over %d tenants, ", progress.GroupDigits(n), tenantCount)
	ratio := measured("tenants.p50_ratio", at+"limited to 1 over unlimited, reserve p50", durationRatio(one.P50, all.P50), unitRatio).
		want("<=", tenantP50Target)
	if n != TenantChunksDefault {
		ratio = ratio.note("the target is for %s chunks", progress.GroupDigits(TenantChunksDefault))
	}
	violations := measured("tenants.violations", "chunks of another tenant handed to the limited consumer", float64(t.violations), unitCount).
		want("==", 0).note("of %d reserves, %d of them to warm up", latencyWarmup+one.N, latencyWarmup)
	if t.violations > 0 {
		r.broke("tenants: %d chunks of tenants other than %s handed to a consumer limited to %s", t.violations, tenantLimited, tenantLimited)
	}
	r.report.add(
		measured("tenants.unlimited.reserve_p50", at+"unlimited consumer, reserve p50", inMillis(all.P50), unitMillis),
		measured("tenants.unlimited.reserve_p99", at+"unlimited consumer, reserve p99", inMillis(all.P99), unitMillis),
		measured("tenants.limited.reserve_p50", at+"consumer limited to "+tenantLimited+", reserve p50", inMillis(one.P50), unitMillis),
		measured("tenants.limited.reserve_p99", at+"consumer limited to "+tenantLimited+", reserve p99", inMillis(one.P99), unitMillis),
		ratio,
		measured("tenants.p99_ratio", at+"limited to 1 over unlimited, reserve p99", durationRatio(one.P99, all.P99), unitRatio).note("no target"),
		violations,
		measured("tenants.insert_seconds", "inserting the backlog", took.Seconds(), unitSeconds).
			note("%d object-storage submissions, %d at a time; no target", tenantCount, tenantInsertParallel),
	)
	r.say("tenants: unlimited reserve p50 %.2f ms, p99 %.2f ms; limited to %s p50 %.2f ms, p99 %.2f ms (%.2f×, %d samples each); %d of another tenant",
		inMillis(all.P50), inMillis(all.P99), tenantLimited, inMillis(one.P50), inMillis(one.P99), durationRatio(one.P50, all.P50), one.N, t.violations)
	return nil
}

// limitedConsumerKey makes a consumer key limited to tenantLimited through the engine, as
// "opsq keys create --role consumer --tenants t17" does, and returns it.
func (r *benchRun) limitedConsumerKey(ctx context.Context) (string, error) {
	_, key, err := apikeys.CreateSpec(ctx, r.env.pool, apikeys.Spec{Name: tenantKeyName, Role: apikeys.Consumer, Tenants: []string{tenantLimited}})
	if err != nil {
		return "", fmt.Errorf("making the key limited to %s: %w", tenantLimited, err)
	}
	return key, nil
}

// waitKnown waits until c's key is accepted (a preview that is not 401), for up to
// tenantKeyWait: an instance learns a key made in the database on its NOTIFY.
func waitKnown(ctx context.Context, c *client.Client) error {
	deadline := time.Now().Add(tenantKeyWait)
	for {
		_, err := c.Preview(ctx, wire.ReserveRequest{Max: 1, Strategy: randomStrategy})
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
			if err != nil {
				return fmt.Errorf("previewing with the key limited to %s: %w", tenantLimited, err)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("instance 0 refuses the key limited to %s %s after it was made: %w", tenantLimited, tenantKeyWait, err)
		}
		if err := clustertest.SleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// tenantShare is how many of n chunks tenant i has: n spread evenly, the first n %
// tenantCount tenants one more.
func tenantShare(n int64, i int) int64 {
	share := n / tenantCount
	if int64(i) < n%tenantCount {
		share++
	}
	return share
}

// insertTenants inserts the backlog: one object-storage submission per tenant, through the
// admin key (a producer key may not name a tenant), tenantInsertParallel at a time. It
// returns the tenant of each submission it created, even on error (the caller discards
// them), and how long the insert took.
func (r *benchRun) insertTenants(ctx context.Context) (map[string]string, time.Duration, error) {
	n := r.cfg.TenantChunks
	admins := make([]*client.Client, len(r.env.instances))
	for i, inst := range r.env.instances {
		admins[i] = client.New(inst.url, client.WithKey(r.env.keys[apikeys.Admin]), client.WithUserAgent("opsq-bench"))
	}
	var (
		mu       sync.Mutex
		tenantOf = map[string]string{}
		inserted atomic.Int64
		next     atomic.Int64
		errs     = make([]error, tenantInsertParallel)
		wg       sync.WaitGroup
	)
	start := time.Now()
	stop := r.showProgress(func() string {
		done := inserted.Load()
		return fmt.Sprintf("tenants: inserted %s / %s chunks over %d tenants (%d%%), %s", progress.GroupDigits(done), progress.GroupDigits(n),
			tenantCount, progress.Percent(done, n), progress.Duration(time.Since(start)))
	})
	defer stop()
	for w := range tenantInsertParallel {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= tenantCount || ctx.Err() != nil {
					return
				}
				share := tenantShare(n, i)
				tenant := tenantName(i)
				created, err := admins[i%len(admins)].Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
					Metadata: "opsq bench: tenants backlog", Tenant: tenant,
					Prefix: "s3://opsq-bench/tenants/" + tenant + "/", ChunkCount: share,
				}})
				if err != nil {
					errs[w] = fmt.Errorf("submitting %s chunks of tenant %s: %w", progress.GroupDigits(share), tenant, err)
					return
				}
				mu.Lock()
				tenantOf[created.ID] = tenant
				mu.Unlock()
				inserted.Add(share)
			}
		})
	}
	wg.Wait()
	return tenantOf, time.Since(start), errors.Join(errs...)
}

// tenantTimes is what timeTenants measured.
type tenantTimes struct {
	unlimited, limited []time.Duration
	violations         int // chunks of another tenant handed to the limited consumer
}

// timeTenants times --samples reserves of each consumer, after latencyWarmup untimed ones,
// in turn (one of the unlimited, one of the limited), so that whatever else the machine
// does weighs on both alike.
func (r *benchRun) timeTenants(ctx context.Context, unlimited, limited *client.Client, tenantOf map[string]string) (tenantTimes, error) {
	t := tenantTimes{unlimited: make([]time.Duration, 0, r.cfg.Samples), limited: make([]time.Duration, 0, r.cfg.Samples)}
	var timed atomic.Int64
	stop := r.showProgress(func() string {
		return fmt.Sprintf("tenants: %d / %d reserves of each consumer timed", timed.Load(), r.cfg.Samples)
	})
	defer stop()
	reserve := func(c *client.Client, consumer string) (wire.ReservedChunk, time.Duration, error) {
		req := wire.ReserveRequest{Max: 1, Strategy: randomStrategy, Lease: "5m", Consumer: consumer}
		start := time.Now()
		chunks, err := c.Reserve(ctx, req)
		took := time.Since(start)
		if err != nil {
			return wire.ReservedChunk{}, 0, fmt.Errorf("%s: reserving: %w", consumer, err)
		}
		if len(chunks) != 1 {
			return wire.ReservedChunk{}, 0, fmt.Errorf("%s: a reserve gave %d chunks; want 1 (the backlog is not empty)", consumer, len(chunks))
		}
		res, err := c.Complete(ctx, wire.Completion{Token: chunks[0].Token, Output: "ok"})
		if err != nil {
			return wire.ReservedChunk{}, 0, fmt.Errorf("%s: completing: %w", consumer, err)
		}
		if res[0].Status != wire.StatusCompleted {
			return wire.ReservedChunk{}, 0, fmt.Errorf("%s: completing a chunk just reserved: status %q; want %q", consumer, res[0].Status, wire.StatusCompleted)
		}
		return chunks[0], took, nil
	}
	for i := range latencyWarmup + r.cfg.Samples {
		_, all, err := reserve(unlimited, "bench-tenants-unlimited")
		if err != nil {
			return t, err
		}
		ch, one, err := reserve(limited, "bench-tenants-"+tenantLimited)
		if err != nil {
			return t, err
		}
		if tenantOf[ch.SubmissionID] != tenantLimited { // another tenant's, or no submission of the backlog
			t.violations++
		}
		if i >= latencyWarmup {
			t.unlimited, t.limited = append(t.unlimited, all), append(t.limited, one)
			timed.Add(1)
		}
	}
	return t, nil
}
