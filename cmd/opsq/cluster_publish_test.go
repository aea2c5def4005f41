//go:build linux

package main

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/cmd/opsq/clustertest"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
)

// TestClusterReservedAfterZeroRenewalNotTakenAtSoftExpiry: a chunk reserved right after a
// renewal that published an in-flight count of 0, then the owner paused (SIGSTOP) past the
// soft expiry: the other instance takes the paused instance's shards that have nothing in
// flight, but not the chunk's shard before its hard expiry, and does not hand the chunk out
// again. The owner publishes a non-zero count before it hands out the first chunk of such
// a shard (claims.Manager.Publish); without that, the published 0 allowed the takeover.
func TestClusterReservedAfterZeroRenewalNotTakenAtSoftExpiry(t *testing.T) {
	c := clustertest.New(t, opsqBinary, pgtest.NewDB(t))
	insts := c.StartN(2)
	ctx := t.Context()
	l := clustertest.NewLedger()
	// A hard expiry far from the soft one, so that the window in which only the published
	// count protects the shard is wide on a busy machine too.
	const hardExpiry = 10 * time.Second
	if _, err := c.Pool.Exec(ctx, "UPDATE opsq.settings SET value = $1 WHERE key = 'claim_hard_expiry'", hardExpiry.String()); err != nil {
		t.Fatal(err)
	}
	clustertest.PollUntil(t, 10*time.Second, "the shards renewed with the new hard expiry", func() string {
		all, err := c.Claims(ctx)
		if err != nil {
			return err.Error()
		}
		for s, r := range all {
			if r.HardExpiresAt == nil || r.HardExpiresAt.Sub(r.Now) < hardExpiry/2 {
				return fmt.Sprintf("shard %d: hard expiry not moved yet", s)
			}
		}
		return ""
	})

	// The pause must begin before the owner's next renewal, which would publish the count
	// anyway (every clustertest.RenewInterval): an attempt in which one ran between the reservation
	// and the pause proves nothing, and is made again.
	for attempt := 1; ; attempt++ {
		if attempt > 10 {
			t.Fatalf("in 10 attempts, a renewal always ran between the reservation and the pause (renew interval %s)", clustertest.RenewInterval)
		}
		sid := clustertest.SubmitChunks(ctx, t, insts[0].Client, l, 1)
		id, _ := strconv.ParseInt(sid, 10, 64)
		shard := opsqtype.ShardOf(id, 0, clustertest.ShardCount)
		all, err := c.Claims(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var owner, other *clustertest.Instance
		for _, inst := range insts {
			if all[shard].Owner() == inst.ID {
				owner = inst
			} else {
				other = inst
			}
		}
		if owner == nil {
			t.Fatalf("shard %d has claimant %q, none of the instances", shard, all[shard].Owner())
		}
		if all[shard].Inflight != 0 {
			t.Fatalf("shard %d: inflight %d before any reservation; want 0", shard, all[shard].Inflight)
		}

		// Reserve right after a renewal of the shard (that published 0).
		last := all[shard].RenewedAt
		var renewed clustertest.ClaimRow
		clustertest.PollUntil(t, 10*time.Second, "a renewal of shard "+strconv.Itoa(shard), func() string {
			rows, err := c.Claims(ctx)
			if err != nil {
				return err.Error()
			}
			if renewed = rows[shard]; renewed.RenewedAt.Equal(*last) {
				return "not renewed yet"
			}
			return ""
		})
		chunks, err := owner.Local.Reserve(ctx, wire.ReserveRequest{Max: 1, Lease: "2m", Consumer: "holder"})
		if err != nil || len(chunks) != 1 {
			t.Fatalf("reserving the chunk through its owner %s: %d chunks, %v; want 1", owner.ID, len(chunks), err)
		}
		l.Deliver(chunks[0], owner.URL, "holder")
		owner.Signal(syscall.SIGSTOP)
		c.SessionsIdle(owner)
		before := c.ClaimsOf(ctx, owner)
		if !before[shard].RenewedAt.Equal(*renewed.RenewedAt) {
			t.Logf("attempt %d: a renewal ran between the reservation and the pause; again", attempt)
			owner.Signal(syscall.SIGCONT)
			completeChunks(t, c, l, owner, chunks)
			continue
		}
		t.Logf("attempt %d: chunk %s reserved from shard %d of %s after the renewal that published %d; paused; the shard's inflight is now %d",
			attempt, clustertest.KeyOf(chunks[0]), shard, owner.ID, renewed.Inflight, before[shard].Inflight)

		// Until the chunk's shard reaches its hard expiry, the other instance takes every
		// shard of the paused one with nothing in flight (at the soft expiry), but not the
		// chunk's shard, and does not hand the chunk out.
		hard := *before[shard].HardExpiresAt
		othersTaken, probes := 0, 0
		var stolen []wire.ReservedChunk
		for {
			all, err := c.Claims(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if all[shard].Now.After(hard.Add(-clustertest.RenewInterval)) {
				break
			}
			othersTaken = 0
			for s := range before {
				if s != shard && all[s].Owner() != owner.ID {
					othersTaken++
				}
			}
			if r := all[shard]; r.Owner() != owner.ID {
				t.Errorf("shard %d with chunk %s in flight was taken by %q at %s, before its hard expiry %s; want it kept by the paused %s",
					shard, clustertest.KeyOf(chunks[0]), r.Owner(), r.Now.Format(time.StampMilli), hard.Format(time.StampMilli), owner.ID)
				break
			}
			got, err := other.Local.Reserve(ctx, wire.ReserveRequest{Max: 10, Lease: "2m", Consumer: "thief"})
			if err != nil {
				t.Fatalf("reserving through %s: %v", other.ID, err)
			}
			probes++
			for _, ch := range got {
				l.Deliver(ch, other.URL, "thief")
				t.Errorf("%s handed out chunk %s while the only one was in flight on the paused %s", other.ID, clustertest.KeyOf(ch), owner.ID)
			}
			stolen = append(stolen, got...)
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("until the hard expiry, %s took %d of the paused instance's %d other shards and handed out nothing in %d probes",
			other.ID, othersTaken, len(before)-1, probes)
		if othersTaken < len(before)-1 {
			t.Errorf("%s took %d of the paused instance's %d shards with nothing in flight before the hard expiry; want all (soft expiry %s)",
				other.ID, othersTaken, len(before)-1, clustertest.SoftExpiry)
		}
		owner.Signal(syscall.SIGCONT)
		if len(stolen) > 0 {
			completeChunks(t, c, l, other, stolen)
		} else {
			completeChunks(t, c, l, owner, chunks)
		}
		break
	}
	c.WaitCompleted(30*time.Second, l)
	if st := l.Check(t, ctx, c.Pool); st.Duplicates > 0 {
		t.Errorf("%d chunks handed out twice; want none", st.Duplicates)
	}
}

// completeChunks completes chunks through inst, waiting for it to answer.
func completeChunks(t *testing.T, c *clustertest.Cluster, l *clustertest.Ledger, inst *clustertest.Instance, chunks []wire.ReservedChunk) {
	t.Helper()
	comps := make([]wire.Completion, len(chunks))
	for i, ch := range chunks {
		comps[i] = wire.Completion{Token: ch.Token, Output: ch.Token}
	}
	var res []wire.TokenResult
	clustertest.PollUntil(t, 30*time.Second, "completing through "+inst.ID, func() string {
		var err error
		if res, err = inst.Client.Complete(t.Context(), comps...); err != nil {
			return err.Error()
		}
		return ""
	})
	for i, r := range res {
		l.Answered(clustertest.KeyOf(chunks[i]), comps[i].Token, r.Status)
	}
}
