package queuer

import (
	"testing"
)

// TestChildren: a submission's children (the dashboard's submission page) are read by id,
// bounded, with their states and how many there are; a submission without children has
// none. Run on Citus too (OPSQ_TEST_CITUS=1).
func TestChildren(t *testing.T) {
	q, _ := setup(t)
	ctx := t.Context()
	parent := submitN(t, q, 1, NewSubmission{})
	var want []int64
	for range 3 {
		want = append(want, after(t, q, 1, "", parent))
	}
	got, total, err := q.Children(ctx, parent, 2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if total != 3 || len(got) != 2 || got[0].ID != want[0] || got[1].ID != want[1] || got[0].State != "in_progress" {
		t.Errorf("the first 2 children: %+v of %d; want %v of 3, in progress", got, total, want[:2])
	}
	if _, total, err := q.Children(ctx, parent, 10, 2); err != nil || total != 2 {
		t.Errorf("the count up to 2: %d, %v; want 2", total, err)
	}
	none, total, err := q.Children(ctx, want[0], 10, 1000)
	if err != nil || len(none) != 0 || total != 0 {
		t.Errorf("a submission without children: %+v, %d, %v; want none", none, total, err)
	}
}
