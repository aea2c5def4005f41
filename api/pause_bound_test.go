package api

import (
	"net/http"
	"strconv"
	"testing"

	"opsq/queuer"
)

// TestPauseStormAnswers429: past OPSQ_MAX_PAUSE_CHUNKS_PER_MINUTE a pause is 429
// too_many_moves with Retry-After, saying what to do, and the submission stays as it was.
func TestPauseStormAnswers429(t *testing.T) {
	t.Parallel()
	e := setupQueuer(t, Config{}, queuer.Config{MaxPauseChunksPerMinute: 5})
	id := mustSubmit(t, e, `{"chunks": ["a", "b", "c"]}`, 3)
	for _, verb := range []string{"pause", "resume"} {
		if r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/"+verb, "", nil); r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", verb, r.Status, r.Body)
		}
	}
	r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/pause", "", nil)
	expectError(t, r, http.StatusTooManyRequests, "too_many_moves", "OPSQ_MAX_PAUSE_CHUNKS_PER_MINUTE", "pause or resume again in")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Errorf("Retry-After %q; want 1 to 60 seconds", r.Header.Get("Retry-After"))
	}
	expectField(t, statusOf(t, e, id), "paused", "false")
}
