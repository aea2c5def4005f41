package main

import (
	"strings"
	"testing"
)

// TestServeRefusesCitusHomeNotHostPort: OPSQ_CITUS_HOME names a worker as pg_dist_node
// does, host:port; anything else is refused at start, naming the setting, before the
// database.
func TestServeRefusesCitusHomeNotHostPort(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"worker1", ":5432", "worker1:", "postgres://worker1:5432/opsq"} {
		var stderr strings.Builder
		err := runServe(t.Context(), []string{"--citus-home", v, "--database-url", "postgres://nowhere.invalid/x"}, &stderr, &stderr)
		if err == nil || !strings.Contains(err.Error(), "OPSQ_CITUS_HOME") {
			t.Errorf("opsq serve --citus-home %q: got %v; want it refused, naming OPSQ_CITUS_HOME", v, err)
		}
	}
}
