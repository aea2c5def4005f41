package sql

import (
	"reflect"
	"testing"
)

// TestCompletedRows holds the reading of chunks_complete.sql's one-row answer: each position
// names the chunk at that place of the batch (1-based), a submission is finished when the
// answer lists it (a short list searched, a long one sorted first), and a position outside
// the batch is an error, not a wrong chunk.
func TestCompletedRows(t *testing.T) {
	p := ChunksCompleteParams{SubmissionIDs: []int64{7, 7, 9}, ChunkIndexes: []int32{0, 1, 4}, Shards: []int32{3, 5, 8}}
	got, err := completedRows(p, []int32{3, 1}, []int64{9})
	if err != nil {
		t.Fatal(err)
	}
	want := []ChunksCompleteRow{{SubmissionID: 9, ChunkIndex: 4, Shard: 8, SubmissionFinished: true}, {SubmissionID: 7, ChunkIndex: 0, Shard: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("completedRows = %+v, want %+v", got, want)
	}
	for _, pos := range []int32{0, 4} {
		if _, err := completedRows(p, []int32{pos}, nil); err == nil {
			t.Errorf("position %d of a batch of 3: no error", pos)
		}
	}

	// Many single-chunk submissions finished at once, listed in no order.
	var many ChunksCompleteParams
	var positions []int32
	var finished []int64
	for i := range 40 {
		many.SubmissionIDs = append(many.SubmissionIDs, int64(100+i))
		many.ChunkIndexes = append(many.ChunkIndexes, 0)
		many.Shards = append(many.Shards, int32(i%64))
		positions = append(positions, int32(i+1))
		if i%2 == 0 {
			finished = append(finished, int64(100+(39-i)))
		}
	}
	rows, err := completedRows(many, positions, finished)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if want := (39-i)%2 == 0; r.SubmissionFinished != want {
			t.Errorf("submission %d: finished %v, want %v", r.SubmissionID, r.SubmissionFinished, want)
		}
	}
}
