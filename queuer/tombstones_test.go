package queuer

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
