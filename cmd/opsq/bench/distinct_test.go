package bench

import (
	"encoding/json"
	"testing"

	"opsq/api/wire"
	"opsq/queuer/opsqtype"
)

func TestBenchDistinctStrategy(t *testing.T) {
	t.Parallel()
	var s struct {
		PreferDistinct struct {
			Key  string `json:"key"`
			Max  int    `json:"max"`
			Then string `json:"then"`
		} `json:"prefer_distinct"`
	}
	if err := json.Unmarshal(distinctStrategy, &s); err != nil {
		t.Fatalf("distinctStrategy %s: %v", distinctStrategy, err)
	}
	if p := s.PreferDistinct; p.Key != distinctKey || p.Max != distinctMax || p.Then != "random" {
		t.Errorf("distinctStrategy %s: got key %q, max %d, then %q; want key %q, max %d, then random",
			distinctStrategy, p.Key, p.Max, p.Then, distinctKey, distinctMax)
	}
}

func TestBenchDistinctBacklogSubmissions(t *testing.T) {
	t.Parallel()
	b := distinctBacklog{first: distinctFirstID, n: 1000, values: 7}
	ids := map[int64]bool{}
	perShard := map[int]int{}
	for i := range b.n {
		sub := b.submission(i)
		id := sub.ID
		if id <= 0 || id < distinctFirstID || ids[id] {
			t.Fatalf("submission %d: id %d; want a new id from %d up", i, id, distinctFirstID)
		}
		ids[id] = true
		if len(sub.Chunks) != 1 || sub.MaxRetries == nil || *sub.MaxRetries != distinctMaxRetries {
			t.Errorf("submission %d: %d chunks, max_retries %v; want 1 and %d", i, len(sub.Chunks), sub.MaxRetries, distinctMaxRetries)
		}
		var metadata map[string]int64
		if err := json.Unmarshal(sub.StrategicMetadata, &metadata); err != nil || len(metadata) != 1 || metadata[distinctKey] != i%7 {
			t.Errorf("submission %d: strategic_metadata %s, %v; want {%q: %d}", i, sub.StrategicMetadata, err, distinctKey, i%7)
		}
		if len(sub.Chunks[0]) == 0 {
			t.Errorf("submission %d: empty input", i)
		}
		perShard[opsqtype.ShardOf(id, 0, 64)]++ // where the engine puts its chunk
	}
	// Single-chunk submissions land on shards by a hash of their id: all of them are used.
	if len(perShard) != 64 {
		t.Errorf("1000 submissions on %d shards; want all 64", len(perShard))
	}
	if got := string(b.submission(42).Chunks[0]); got != "distinct operation 42 of the opsq bench" {
		t.Errorf("input of submission 42 = %q", got)
	}
}

func TestBenchDistinctBacklogHolds(t *testing.T) {
	t.Parallel()
	b := distinctBacklog{first: 1000, n: 10, values: 3}
	for _, tt := range []struct {
		id    string
		index int64
		want  bool
	}{
		{"1000", 0, true}, {"1009", 0, true}, {"999", 0, false}, {"1010", 0, false}, {"1005", 1, false}, {"x", 0, false},
	} {
		if got := b.holds(wire.ReservedChunk{SubmissionID: tt.id, ChunkIndex: tt.index}); got != tt.want {
			t.Errorf("holds(submission %s, chunk %d) = %v; want %v", tt.id, tt.index, got, tt.want)
		}
	}
}

func TestBenchDistinctHeld(t *testing.T) {
	t.Parallel()
	chunk := func(token string, metadata map[string]wire.MetadataValue) wire.ReservedChunk {
		return wire.ReservedChunk{Token: token, StrategicMetadata: metadata}
	}
	company := func(v int64) map[string]wire.MetadataValue {
		return map[string]wire.MetadataValue{distinctKey: wire.Int(v)}
	}
	h := newDistinctHeld()
	h.add(chunk("a", company(3)))
	h.add(chunk("b", company(3)))
	h.add(chunk("c", company(5)))
	h.add(chunk("d", nil)) // without the key: held, but saturates nothing
	if len(h.tokens) != 4 || h.values() != 2 {
		t.Errorf("got %d tokens over %d values; want 4 over 2", len(h.tokens), h.values())
	}
	for _, tt := range []struct {
		name string
		ch   wire.ReservedChunk
		want bool
	}{
		{"held twice", chunk("x", company(3)), true},
		{"held once", chunk("x", company(5)), true},
		{"not held", chunk("x", company(4)), false},
		{"a string, not the integer", chunk("x", map[string]wire.MetadataValue{distinctKey: wire.String("3")}), false},
		{"another key", chunk("x", map[string]wire.MetadataValue{"tenant": wire.Int(3)}), false},
		{"no metadata", chunk("x", nil), false},
	} {
		if got := h.saturated(tt.ch); got != tt.want {
			t.Errorf("%s: saturated = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestBenchRandomSaturatedHits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n, saturated int
		values       int64
		want         int
	}{
		{2000, 500, 2000, 500}, {300, 500, 2000, 75}, {10, 1, 3, 3}, {10, 0, 5, 0}, {10, 1, 0, 0},
	} {
		if got := randomSaturatedHits(tt.n, tt.saturated, tt.values); got != tt.want {
			t.Errorf("randomSaturatedHits(%d, %d, %d) = %d; want %d", tt.n, tt.saturated, tt.values, got, tt.want)
		}
	}
}
