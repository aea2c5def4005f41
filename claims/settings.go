// Package claims is the shard-claim protocol of DESIGN.md §4, and the cluster-wide state it
// stands on: the settings table and the instances table.
package claims

import (
	"context"
	"fmt"
	"strconv"
	"time"

	opsqsql "opsq/sql"
)

// Querier is what the data functions of this package need: a pool, a connection or a
// transaction (sql.DB, which the statements run on).
type Querier = opsqsql.DB

// Settings are the cluster-wide settings of opsq.settings, one source of truth for every
// instance. Operators change them with SQL; instances re-read them.
type Settings struct {
	ShardCount        int           // shard_count: fixed at the first migration.
	RenewInterval     time.Duration // claim_renew_interval
	SoftExpiry        time.Duration // claim_soft_expiry
	HardExpiry        time.Duration // claim_hard_expiry
	HeartbeatTimeout  time.Duration // instance_heartbeat_timeout
	DrainTimeout      time.Duration // drain_timeout
	Retention         time.Duration // retention
	DefaultMaxRetries int           // default_max_retries
}

// LoadSettings reads opsq.settings. A value that does not parse is an error naming the key,
// so that an operator's typo is reported instead of silently replaced by a default.
func LoadSettings(ctx context.Context, db Querier) (Settings, error) {
	rows, err := opsqsql.New(db).SettingsLoad(ctx)
	if err != nil {
		return Settings{}, fmt.Errorf("reading opsq.settings: %w", err)
	}
	values := make(map[string]string, len(rows))
	for _, r := range rows {
		values[r.Key] = r.Value
	}
	var s Settings
	p := settingsParser{values: values}
	s.ShardCount = p.count("shard_count", 1)
	s.RenewInterval = p.duration("claim_renew_interval")
	s.SoftExpiry = p.duration("claim_soft_expiry")
	s.HardExpiry = p.duration("claim_hard_expiry")
	s.HeartbeatTimeout = p.duration("instance_heartbeat_timeout")
	s.DrainTimeout = p.duration("drain_timeout")
	s.Retention = p.duration("retention")
	s.DefaultMaxRetries = p.count("default_max_retries", 0)
	if p.err != nil {
		return Settings{}, p.err
	}
	return s, nil
}

// settingsParser keeps the first error so that LoadSettings reads as a list of keys.
type settingsParser struct {
	values map[string]string
	err    error
}

func (p *settingsParser) raw(key string) (string, bool) {
	v, ok := p.values[key]
	if !ok && p.err == nil {
		p.err = fmt.Errorf("opsq.settings: %s is missing; run \"opsq migrate up\"", key)
	}
	return v, ok
}

func (p *settingsParser) duration(key string) time.Duration {
	v, ok := p.raw(key)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if (err != nil || d <= 0) && p.err == nil {
		p.err = fmt.Errorf("opsq.settings: %s = %q: must be a positive Go duration such as \"10s\"", key, v)
	}
	return d
}

func (p *settingsParser) count(key string, min int) int {
	v, ok := p.raw(key)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if (err != nil || n < min) && p.err == nil {
		p.err = fmt.Errorf("opsq.settings: %s = %q: must be an integer ≥ %d", key, v, min)
	}
	return n
}
