package submissions

import (
	"fmt"
	"sync"
	"time"

	opsqsql "opsq/sql"
)

// Snowflake ids: 42 bits of milliseconds since IDEpoch, 10 bits of node id (the instance's
// generator id from opsq.instances), 12 bits of sequence within the millisecond. Ordering
// by id is ordering by age, across instances to within clock skew.
const (
	nodeBits     = 10
	sequenceBits = 12
	maxNode      = 1<<nodeBits - 1
	maxSequence  = 1<<sequenceBits - 1
)

// IDEpoch is the zero of the snowflake clock.
var IDEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// IDTime returns the creation time encoded in a snowflake id, to the millisecond.
func IDTime(id int64) time.Time {
	return IDEpoch.Add(time.Duration(id>>(nodeBits+sequenceBits)) * time.Millisecond)
}

// ErrNodeLease means the instance has not renewed its node id recently enough to be sure
// nobody else holds it; it must not mint ids until its heartbeat succeeds. It is
// sql.ErrUnavailable: the heartbeat fails while the database is away (a failover managed
// by pg_auto_failover takes about 50 s by default), and a producer should retry, not take
// it for a broken request.
var ErrNodeLease = fmt.Errorf("this instance's node id is not confirmed by a recent heartbeat: %w", opsqsql.ErrUnavailable)

// IDs makes snowflake ids. It is safe for concurrent use.
type IDs struct {
	mu struct {
		sync.Mutex
		node       int
		validUntil time.Time // by the monotonic clock; zero: not registered
		lastMillis int64
		sequence   int64
	}
	now func() time.Time
}

// NewIDs returns a generator without a node id: SetNode gives it one.
func NewIDs() *IDs {
	return &IDs{now: time.Now}
}

// SetNode confirms node as this instance's generator id until validUntil.
func (g *IDs) SetNode(node int, validUntil time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.node = node
	g.mu.validUntil = validUntil
}

// Valid reports whether the node id is confirmed at now.
func (g *IDs) Valid(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.mu.validUntil.IsZero() && now.Before(g.mu.validUntil)
}

// Next returns a new id. While the clock is behind the last id's millisecond (it stepped
// back) ids go on from that millisecond; when its 4096 ids are taken, next waits for the
// clock to reach the next millisecond.
func (g *IDs) Next() (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		now := g.now()
		if g.mu.validUntil.IsZero() || now.After(g.mu.validUntil) {
			return 0, ErrNodeLease
		}
		ms := now.Sub(IDEpoch).Milliseconds()
		if ms >= 1<<42 {
			return 0, fmt.Errorf("snowflake clock overflow at %s", now)
		}
		switch {
		case ms > g.mu.lastMillis:
			g.mu.lastMillis, g.mu.sequence = ms, 0
		case g.mu.sequence < maxSequence:
			g.mu.sequence++
		default:
			time.Sleep(100 * time.Microsecond)
			continue
		}
		return g.mu.lastMillis<<(nodeBits+sequenceBits) | int64(g.mu.node)<<sequenceBits | g.mu.sequence, nil
	}
}
