package main

import (
	"testing"

	"opsq/sql/pgtest"
)

// TestNewPoolTurnsJITOff checks that the request pool of opsq serve runs with JIT off
// (sql.ConfigureSession): the complete statement, the submissions' and the prefer_distinct
// inputs' statements run on it, and some of their estimates grow with the backlog.
func TestNewPoolTurnsJITOff(t *testing.T) {
	t.Parallel()
	pool, err := newPool(t.Context(), pgtest.NewDB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var jit string
	if err := pool.QueryRow(t.Context(), "SHOW jit").Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "off" {
		t.Errorf("jit = %s on the request pool's connections; want off", jit)
	}
	// On Citus, one connection per worker for a statement over several shards
	// (sql.ConfigureSession); on one PostgreSQL a setting nothing reads, accepted all the same.
	var poolSize string
	if err := pool.QueryRow(t.Context(), "SHOW citus.max_adaptive_executor_pool_size").Scan(&poolSize); err != nil {
		t.Fatal(err)
	}
	if poolSize != "1" {
		t.Errorf("citus.max_adaptive_executor_pool_size = %s on the request pool's connections; want 1", poolSize)
	}
}
