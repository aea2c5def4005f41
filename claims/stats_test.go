package claims

import (
	"fmt"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

// TestStats: the counters follow what the loop did — shards acquired, a renewal timed, a
// shard taken away counted lost, the shards given back at Stop counted released.
func TestStats(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	m := f.start("stats")
	waitCycles(t, m.Manager, 2)
	held := len(m.Reservable())
	s := m.Stats()
	if s.Acquired != int64(held) || held == 0 {
		t.Errorf("Stats().Acquired %d; want the %d shards held", s.Acquired, held)
	}
	if s.Renewals.Count < 2 || s.Renewals.Sum <= 0 || s.Renewals.Counts[len(s.Renewals.Counts)-1] > s.Renewals.Count {
		t.Errorf("Stats().Renewals %+v; want at least 2 renewals, cumulative counts", s.Renewals)
	}
	if age := time.Since(s.LastRenewal); age < 0 || age > 5*time.Second {
		t.Errorf("Stats().LastRenewal %s ago; want within the last cycles", age)
	}
	// An operator takes a shard away, as sql/admin/force_release_shard.sql does.
	victim := m.Reservable()[0].Shard
	f.exec(`UPDATE opsq.shard_claims SET claimant = NULL, generation = generation + 1 WHERE shard = $1`, victim)
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().Lost != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Stats().Lost %d after the shard was taken away; want 1", m.Stats().Lost)
		}
		waitCycles(t, m.Manager, 1)
	}
	m.Stop()
	s = m.Stats()
	if s.Released == 0 || s.Released > s.Acquired {
		t.Errorf("Stats().Released %d after Stop (acquired %d); want the shards held at Stop", s.Released, s.Acquired)
	}
}

// TestStatsCountFailedCycles: with the database unreachable every cycle fails at its
// heartbeat, before the renewal; each counts as a renewal failure and a cycle failure, so
// that opsq_claims_renew_failures_total rises during an outage. Back, they stop counting.
func TestStatsCountFailedCycles(t *testing.T) {
	t.Parallel()
	f := setup(t, fast)
	ctl := f.control()
	m := f.start("failures")
	waitCycles(t, m.Manager, 2)
	if s := m.Stats(); s.RenewFailures != 0 || s.CycleFailures != 0 {
		t.Fatalf("Stats() with the database up: %d renewal failures, %d cycle failures; want 0", s.RenewFailures, s.CycleFailures)
	}

	ctl.cut()
	pgtest.WaitFor(t, 20*time.Second, "3 failed renewals with the database unreachable", func() string {
		if s := m.Stats(); s.RenewFailures < 3 {
			return fmt.Sprintf("Stats().RenewFailures %d, CycleFailures %d", s.RenewFailures, s.CycleFailures)
		}
		return ""
	})
	ctl.restore()
	pgtest.WaitFor(t, 20*time.Second, "a successful cycle after the database came back", func() string {
		if err := m.Running(); err != nil {
			return err.Error()
		}
		return ""
	})
	waitCycles(t, m.Manager, 1)
	before := m.Stats()
	if before.CycleFailures < before.RenewFailures {
		t.Errorf("Stats(): %d cycle failures < %d renewal failures; want every failed renewal counted as a failed cycle",
			before.CycleFailures, before.RenewFailures)
	}
	waitCycles(t, m.Manager, 3)
	if after := m.Stats(); after.RenewFailures != before.RenewFailures {
		t.Errorf("Stats().RenewFailures %d after 3 more cycles with the database back; want it to stay %d",
			after.RenewFailures, before.RenewFailures)
	}
}
