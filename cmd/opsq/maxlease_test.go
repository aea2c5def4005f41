package main

import (
	"strings"
	"testing"
)

// TestServeRefusesMaxLeaseOutOfRange: OPSQ_MAX_LEASE lies between 1s and 24h (the cluster
// keys stay valid for the longest lease); the check runs at start, before the database.
func TestServeRefusesMaxLeaseOutOfRange(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0s", "500ms", "25h"} {
		var stderr strings.Builder
		err := runServe(t.Context(), []string{"--max-lease", v, "--database-url", "postgres://nowhere.invalid/x"}, &stderr, &stderr)
		if err == nil || !strings.Contains(err.Error(), "OPSQ_MAX_LEASE") {
			t.Errorf("opsq serve --max-lease %s: got %v; want it refused, naming OPSQ_MAX_LEASE", v, err)
		}
	}
}
