package handout

import (
	"testing"

	"opsq/reserver"
)

// TestTombstonesNotKeptWithoutAScan: a change made while no scan runs leaves no tombstone,
// since no scan can have read the chunk as it was.
func TestTombstonesNotKeptWithoutAScan(t *testing.T) {
	t.Parallel()
	ts := newTombstones()
	k := reserver.Key{SubmissionID: 1, ChunkIndex: 2}
	ts.add(k)
	if ts.has(k) {
		t.Errorf("has(%v) after add with no scan running = true; want false", k)
	}
}

// TestTombstonesLiveUntilEveryEarlierScanEnds: a tombstone lives while a scan that began
// before its change runs, and is dropped when the last such scan ends; scans that began
// after the change do not keep it.
func TestTombstonesLiveUntilEveryEarlierScanEnds(t *testing.T) {
	t.Parallel()
	ts := newTombstones()
	k1 := reserver.Key{SubmissionID: 1, ChunkIndex: 0}
	k2 := reserver.Key{SubmissionID: 2, ChunkIndex: 0}

	a := ts.begin()
	b := ts.begin() // same epoch as a
	ts.add(k1)      // a and b may have read k1 as it was
	c := ts.begin() // began after k1's change
	ts.add(k2)      // a, b and c may have read k2 as it was
	for _, k := range []reserver.Key{k1, k2} {
		if !ts.has(k) {
			t.Fatalf("has(%v) while the scans that began before its change run = false; want true", k)
		}
	}

	ts.end(a)
	if !ts.has(k1) || !ts.has(k2) {
		t.Fatalf("after one of two scans of the same epoch ended: has(k1) = %t, has(k2) = %t; want both true (b runs)", ts.has(k1), ts.has(k2))
	}
	ts.end(b)
	if ts.has(k1) {
		t.Errorf("has(k1) once every scan that began before its change ended = true; want false (c began after it)")
	}
	if !ts.has(k2) {
		t.Errorf("has(k2) while c, which began before its change, runs = false; want true")
	}
	ts.end(c)
	if ts.has(k2) {
		t.Errorf("has(k2) once every scan ended = true; want false")
	}
	if n := len(ts.keys); n != 0 {
		t.Errorf("%d tombstones left with no scan running; want 0", n)
	}
}

// TestTombstonesALaterChangeOfTheSameKeyKeepsIt: a key changed again after a newer scan
// began lives as long as that scan.
func TestTombstonesALaterChangeOfTheSameKeyKeepsIt(t *testing.T) {
	t.Parallel()
	ts := newTombstones()
	k := reserver.Key{SubmissionID: 3, ChunkIndex: 1}
	a := ts.begin()
	ts.add(k)
	b := ts.begin()
	ts.add(k) // changed again while b runs
	ts.end(a)
	if !ts.has(k) {
		t.Fatalf("has(%v) while b, which began before its second change, runs = false; want true", k)
	}
	ts.end(b)
	if ts.has(k) {
		t.Errorf("has(%v) once every scan ended = true; want false", k)
	}
}

// TestTombstonesOfARetryHideOnlyTheRowsReadBeforeIt: a retried chunk's tombstone hides
// the rows read with the retried attempt's count (or lower), not the row as it is now, so
// that a scan that reads it again takes it while an older buffer keeps the tombstone.
func TestTombstonesOfARetryHideOnlyTheRowsReadBeforeIt(t *testing.T) {
	t.Parallel()
	ts := newTombstones()
	k := reserver.Key{SubmissionID: 4, ChunkIndex: 2}
	held := ts.begin() // a buffer read k with retries 0
	ts.addRetried(k, 0)
	if !ts.stale(k, 0) {
		t.Errorf("stale(k, 0) after attempt 0 was retried = false; want true (read before the retry)")
	}
	if ts.stale(k, 1) {
		t.Errorf("stale(k, 1) after attempt 0 was retried = true; want false (the row as it is now)")
	}
	ts.addRetried(k, 1)
	if !ts.stale(k, 1) || ts.stale(k, 2) {
		t.Errorf("after attempt 1 was retried: stale(k, 1) = %t, stale(k, 2) = %t; want true, false", ts.stale(k, 1), ts.stale(k, 2))
	}
	ts.add(k) // completed
	if !ts.stale(k, 2) || !ts.stale(k, 9) {
		t.Errorf("after k was completed: stale(k, 2) = %t, stale(k, 9) = %t; want both true", ts.stale(k, 2), ts.stale(k, 9))
	}
	ts.addRetried(k, 3) // a late retry notice does not unhide a finished chunk
	if !ts.stale(k, 9) {
		t.Errorf("stale(k, 9) after a retry notice following the completion = false; want true")
	}
	ts.end(held)
	if ts.has(k) || ts.len() != 0 || len(ts.log) != 0 {
		t.Errorf("after the last scan ended: has(k) = %t, %d tombstones, %d logged; want none", ts.has(k), ts.len(), len(ts.log))
	}
}
