package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// runMainEnv makes the test binary run "opsq" instead of the tests (TestMain).
const runMainEnv = "OPSQ_TEST_RUN_MAIN"

// opsqBinary is this test binary as "opsq": the multi-instance tests (cluster_test.go) run
// their instances as processes of it, so that no separate build is needed.
var opsqBinary = clustertest.Binary{Path: os.Args[0], Env: []string{runMainEnv + "=1"}}

func TestMain(m *testing.M) {
	// The multi-instance tests (cluster_test.go) run opsq instances as processes of this
	// very binary: with OPSQ_TEST_RUN_MAIN=1 it is "opsq", not the tests.
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
