//go:build linux

package main

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"opsq/client"
	"opsq/queuer"
)

// TestClusterReservedAfterZeroRenewalNotTakenAtSoftExpiry: a chunk reserved right after a
// renewal that published an in-flight count of 0, then the owner paused (SIGSTOP) past the
// soft expiry: the other instance takes the paused instance's shards that have nothing in
// flight, but not the chunk's shard before its hard expiry, and does not hand the chunk out
// again. The owner publishes a non-zero count before it hands out the first chunk of such
// a shard (claims.Manager.Publish); without that, the published 0 allowed the takeover.
func TestClusterReservedAfterZeroRenewalNotTakenAtSoftExpiry(t *testing.T) {
	c := newProcCluster(t, 2)
	insts := c.running()
	ctx := t.Context()
	l := newLedger()
	// A hard expiry far from the soft one, so that the window in which only the published
	// count protects the shard is wide on a busy machine too.
	const hardExpiry = 10 * time.Second
	if _, err := c.pool.Exec(ctx, "UPDATE opsq.settings SET value = $1 WHERE key = 'claim_hard_expiry'", hardExpiry.String()); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 10*time.Second, "the shards renewed with the new hard expiry", func() string {
		all, err := c.claims(ctx)
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
	// anyway (every tcRenewInterval): an attempt in which one ran between the reservation
	// and the pause proves nothing, and is made again.
	for attempt := 1; ; attempt++ {
		if attempt > 10 {
			t.Fatalf("in 10 attempts, a renewal always ran between the reservation and the pause (renew interval %s)", tcRenewInterval)
		}
		sid := submitChunksN(ctx, t, insts[0].client, l, 1)
		id, _ := strconv.ParseInt(sid, 10, 64)
		shard := queuer.ShardOf(id, 0, tcShardCount)
		all, err := c.claims(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var owner, other *procInstance
		for _, inst := range insts {
			if all[shard].claimant() == inst.id {
				owner = inst
			} else {
				other = inst
			}
		}
		if owner == nil {
			t.Fatalf("shard %d has claimant %q, none of the instances", shard, all[shard].claimant())
		}
		if all[shard].Inflight != 0 {
			t.Fatalf("shard %d: inflight %d before any reservation; want 0", shard, all[shard].Inflight)
		}

		// Reserve right after a renewal of the shard (that published 0).
		last := all[shard].RenewedAt
		var renewed claimRow
		pollUntil(t, 10*time.Second, "a renewal of shard "+strconv.Itoa(shard), func() string {
			rows, err := c.claims(ctx)
			if err != nil {
				return err.Error()
			}
			if renewed = rows[shard]; renewed.RenewedAt.Equal(*last) {
				return "not renewed yet"
			}
			return ""
		})
		chunks, err := owner.local.Reserve(ctx, client.ReserveRequest{Max: 1, Lease: "2m", Consumer: "holder"})
		if err != nil || len(chunks) != 1 {
			t.Fatalf("reserving the chunk through its owner %s: %d chunks, %v; want 1", owner.id, len(chunks), err)
		}
		l.deliver(chunks[0], owner.url, "holder")
		owner.signal(syscall.SIGSTOP)
		c.sessionsIdle(owner)
		before := c.claimsOf(ctx, owner)
		if !before[shard].RenewedAt.Equal(*renewed.RenewedAt) {
			t.Logf("attempt %d: a renewal ran between the reservation and the pause; again", attempt)
			owner.signal(syscall.SIGCONT)
			completeChunks(t, c, l, owner, chunks)
			continue
		}
		t.Logf("attempt %d: chunk %s reserved from shard %d of %s after the renewal that published %d; paused; the shard's inflight is now %d",
			attempt, keyOf(chunks[0]), shard, owner.id, renewed.Inflight, before[shard].Inflight)

		// Until the chunk's shard reaches its hard expiry, the other instance takes every
		// shard of the paused one with nothing in flight (at the soft expiry), but not the
		// chunk's shard, and does not hand the chunk out.
		hard := *before[shard].HardExpiresAt
		othersTaken, probes := 0, 0
		var stolen []client.ReservedChunk
		for {
			all, err := c.claims(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if all[shard].Now.After(hard.Add(-tcRenewInterval)) {
				break
			}
			othersTaken = 0
			for s := range before {
				if s != shard && all[s].claimant() != owner.id {
					othersTaken++
				}
			}
			if r := all[shard]; r.claimant() != owner.id {
				t.Errorf("shard %d with chunk %s in flight was taken by %q at %s, before its hard expiry %s; want it kept by the paused %s",
					shard, keyOf(chunks[0]), r.claimant(), r.Now.Format(time.StampMilli), hard.Format(time.StampMilli), owner.id)
				break
			}
			got, err := other.local.Reserve(ctx, client.ReserveRequest{Max: 10, Lease: "2m", Consumer: "thief"})
			if err != nil {
				t.Fatalf("reserving through %s: %v", other.id, err)
			}
			probes++
			for _, ch := range got {
				l.deliver(ch, other.url, "thief")
				t.Errorf("%s handed out chunk %s while the only one was in flight on the paused %s", other.id, keyOf(ch), owner.id)
			}
			stolen = append(stolen, got...)
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("until the hard expiry, %s took %d of the paused instance's %d other shards and handed out nothing in %d probes",
			other.id, othersTaken, len(before)-1, probes)
		if othersTaken < len(before)-1 {
			t.Errorf("%s took %d of the paused instance's %d shards with nothing in flight before the hard expiry; want all (soft expiry %s)",
				other.id, othersTaken, len(before)-1, tcSoftExpiry)
		}
		owner.signal(syscall.SIGCONT)
		if len(stolen) > 0 {
			completeChunks(t, c, l, other, stolen)
		} else {
			completeChunks(t, c, l, owner, chunks)
		}
		break
	}
	c.waitCompleted(30*time.Second, l)
	if st := l.check(t, ctx, c.pool); st.duplicates > 0 {
		t.Errorf("%d chunks handed out twice; want none", st.duplicates)
	}
}

// completeChunks completes chunks through inst, waiting for it to answer.
func completeChunks(t *testing.T, c *procCluster, l *ledger, inst *procInstance, chunks []client.ReservedChunk) {
	t.Helper()
	comps := make([]client.Completion, len(chunks))
	for i, ch := range chunks {
		comps[i] = client.Completion{Token: ch.Token, Output: ch.Token}
	}
	var res []client.TokenResult
	pollUntil(t, 30*time.Second, "completing through "+inst.id, func() string {
		var err error
		if res, err = inst.client.Complete(t.Context(), comps...); err != nil {
			return err.Error()
		}
		return ""
	})
	for i, r := range res {
		l.answered(keyOf(chunks[i]), comps[i].Token, r.Status)
	}
}
