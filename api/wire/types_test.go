package wire

import (
	"encoding/json"
	"testing"
)

// TestWireWords checks that the named types encode as the bare strings of DESIGN.md §3.
func TestWireWords(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(struct {
		S  State       `json:"s"`
		T  TokenStatus `json:"t"`
		C  ClaimState  `json:"c"`
		SL []State     `json:"sl"`
	}{StateInProgress, StatusAlreadyFinished, ClaimDraining, States()})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"s":"in_progress","t":"already_finished","c":"draining","sl":["in_progress","completed","failed","cancelled"]}`
	if string(b) != want {
		t.Fatalf("got %s; want %s", b, want)
	}
	for _, s := range States() {
		if got, want := s.Finished(), s != StateInProgress; got != want {
			t.Errorf("%s.Finished() = %v; want %v", s, got, want)
		}
	}
	var r TokenResult
	if err := json.Unmarshal([]byte(`{"token":"x","status":"retrying"}`), &r); err != nil || r.Status != StatusRetrying {
		t.Fatalf("decoding a token result: %+v, %v; want status retrying", r, err)
	}
}
