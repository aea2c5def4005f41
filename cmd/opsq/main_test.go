package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"opsq/migrations/pgtest"
)

func TestMain(m *testing.M) {
	// The multi-instance tests (cluster_test.go) run opsq instances as processes of this
	// very binary: with OPSQ_TEST_RUN_MAIN=1 it is "opsq", not the tests.
	if os.Getenv("OPSQ_TEST_RUN_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
