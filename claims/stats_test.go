package claims

import (
	"testing"
	"time"
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
