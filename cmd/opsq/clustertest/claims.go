package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/queuer"
)

// ClaimRow is a row of opsq.shard_claims, with the database's now().
type ClaimRow struct {
	Shard         int        `db:"shard"`
	Claimant      *string    `db:"claimant"`
	Generation    int64      `db:"generation"`
	SoftExpiresAt *time.Time `db:"soft_expires_at"`
	HardExpiresAt *time.Time `db:"hard_expires_at"`
	Inflight      int        `db:"inflight"`
	AcquiredAt    *time.Time `db:"acquired_at"`
	RenewedAt     *time.Time `db:"renewed_at"`
	Now           time.Time  `db:"now"`
}

// Owner is the claimant, "" when the shard is free.
func (r ClaimRow) Owner() string {
	if r.Claimant == nil {
		return ""
	}
	return *r.Claimant
}

// ReadClaims reads opsq.shard_claims, by shard.
func ReadClaims(ctx context.Context, db *pgxpool.Pool) (map[int]ClaimRow, error) {
	rows, err := db.Query(ctx, `SELECT shard, claimant, generation, soft_expires_at, hard_expires_at,
		       inflight, acquired_at, renewed_at, now() AS now
		FROM opsq.shard_claims ORDER BY shard`)
	if err != nil {
		return nil, fmt.Errorf("reading opsq.shard_claims: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[ClaimRow])
	if err != nil {
		return nil, fmt.Errorf("reading opsq.shard_claims: %w", err)
	}
	out := make(map[int]ClaimRow, len(list))
	for _, r := range list {
		out[r.Shard] = r
	}
	return out, nil
}

// Claims reads opsq.shard_claims, by shard.
func (c *Cluster) Claims(ctx context.Context) (map[int]ClaimRow, error) {
	return ReadClaims(ctx, c.Pool)
}

// MustClaims is Claims failing the test on an error.
func (c *Cluster) MustClaims(ctx context.Context) map[int]ClaimRow {
	c.t.Helper()
	rows, err := c.Claims(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	return rows
}

// ClaimsOf returns the rows of the shards inst holds.
func (c *Cluster) ClaimsOf(ctx context.Context, inst *Instance) map[int]ClaimRow {
	c.t.Helper()
	out := map[int]ClaimRow{}
	for s, r := range c.MustClaims(ctx) {
		if r.Owner() == inst.ID {
			out[s] = r
		}
	}
	return out
}

// WatchTakeover polls opsq.shard_claims until every shard of before has a new claimant
// (another instance, under a higher generation) and returns each shard's first row seen
// with the new claimant.
func (c *Cluster) WatchTakeover(timeout time.Duration, before map[int]ClaimRow) map[int]ClaimRow {
	c.t.Helper()
	after := map[int]ClaimRow{}
	PollUntil(c.t, timeout, "the shards to be taken over", func() string {
		all, err := c.Claims(c.t.Context())
		if err != nil {
			return err.Error()
		}
		var waiting []int
		for s, old := range before {
			if _, ok := after[s]; ok {
				continue
			}
			r := all[s]
			if r.Generation != old.Generation && r.Owner() != "" {
				after[s] = r
				continue
			}
			waiting = append(waiting, s)
		}
		if len(waiting) == 0 {
			return ""
		}
		slices.Sort(waiting)
		return fmt.Sprintf("%d shards not taken yet: %v", len(waiting), waiting)
	})
	return after
}

// DBNow returns the database's clock.
func (c *Cluster) DBNow(ctx context.Context) time.Time {
	c.t.Helper()
	var now time.Time
	if err := c.Pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		c.t.Fatalf("reading now(): %v", err)
	}
	return now
}

// SessionsIdle waits until none of inst's database sessions is running a statement: after
// SIGKILL or SIGSTOP, whatever it had sent has been executed, and nothing more will be
// until it resumes.
func (c *Cluster) SessionsIdle(inst *Instance) {
	c.t.Helper()
	PollUntil(c.t, 5*time.Second, inst.ID+"'s sessions to be idle", func() string {
		var active int
		err := c.Pool.QueryRow(c.t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND state = 'active'`, inst.ID).Scan(&active)
		if err != nil {
			return err.Error()
		}
		if active > 0 {
			return fmt.Sprintf("%d active sessions", active)
		}
		return ""
	})
}

// TokenClaim returns the shard and the claim generation a token was issued under, read
// by the queuer's own parser (a consumer's token is opaque; the tests read it to check
// fencing).
func TokenClaim(tok string) (shard int, generation int64, err error) {
	return queuer.TokenClaim(tok)
}

// ShardsOfChunks counts chunks by shard (read from their tokens).
func ShardsOfChunks(t testing.TB, chunks []wire.ReservedChunk) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, ch := range chunks {
		s, _, err := TokenClaim(ch.Token)
		if err != nil {
			t.Fatal(err)
		}
		out[s]++
	}
	return out
}

// describeBacklog says which shards, held by whom, still have chunks of ids.
func (c *Cluster) describeBacklog(ids []int64) string {
	rows, err := c.Pool.Query(c.t.Context(), `
		SELECT k.shard, count(*), coalesce(c.claimant, '-'), c.generation, c.inflight, c.available
		FROM opsq.chunks k JOIN opsq.shard_claims c ON c.shard = k.shard
		WHERE k.submission_id = ANY($1)
		GROUP BY k.shard, c.claimant, c.generation, c.inflight, c.available
		ORDER BY k.shard`, ids)
	if err != nil {
		return err.Error()
	}
	var parts []string
	var shard, n, inflight int
	var claimant string
	var gen int64
	var avail bool
	_, err = pgx.ForEachRow(rows, []any{&shard, &n, &claimant, &gen, &inflight, &avail}, func() error {
		parts = append(parts, fmt.Sprintf("shard %d: %d chunks, %s gen %d inflight %d available %t", shard, n, claimant, gen, inflight, avail))
		return nil
	})
	if err != nil {
		return err.Error()
	}
	if len(parts) > 20 {
		parts = append(parts[:20], fmt.Sprintf("… %d more shards", len(parts)-20))
	}
	return "chunks left: " + strings.Join(parts, "; ")
}
