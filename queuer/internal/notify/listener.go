package notify

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/startstop"
	opsqsql "opsq/sql"
)

// Listener is the instance's one LISTEN connection (never one of the request pool's, so
// that requests cannot delay a notification): it raises each notification of the engine's
// channels on the bus as its events, and hands those of the other channels it was given
// (the API keys') to their functions, with an empty payload after a reconnection. Its
// goroutine lives from Start until Stop.
type Listener struct {
	bus       *Bus
	others    map[string]func(payload string)
	readToken TokenReader
	conn      *opsqsql.Listener
}

// TokenReader reads a reservation token that a NOTIFY names (a chunk retried, its
// reservation released) as the chunk it is freed: the engine's token parser, which this
// package does not know. ok false: not a token; the item is passed over.
type TokenReader func(token string) (f Freed, ok bool)

var _ startstop.Service = (*Listener)(nil)

// NewListener returns a listener of the engine's channels and of others' on a connection
// made from pool's configuration, raising the engine's events on bus; readToken reads the
// tokens of the chunks released (nil: they are passed over, for a listener of others'
// channels only).
func NewListener(pool *pgxpool.Pool, log *slog.Logger, bus *Bus, others map[string]func(payload string), readToken TokenReader) *Listener {
	l := &Listener{bus: bus, others: others, readToken: readToken}
	channels := []string{ChannelWork, ChannelFinished, ChannelReleased, ChannelClusterKeys, ChannelProgress, ChannelPaused, ChannelThrottles, ChannelParents}
	for c := range others {
		channels = append(channels, c)
	}
	l.conn = opsqsql.NewListener(pool, log, l.notified, channels...)
	return l
}

// Start connects; it returns once the LISTEN is in place. The other channels' functions
// are then called with "" once: what was announced before the LISTEN was missed.
func (l *Listener) Start(ctx context.Context) error {
	if err := l.conn.Start(ctx); err != nil {
		return err
	}
	for _, fn := range l.others {
		fn("")
	}
	return nil
}

// Stop closes the connection. Safe twice and before Start.
func (l *Listener) Stop() { l.conn.Stop() }

func (l *Listener) notified(channel, payload string) {
	if fn, ok := l.others[channel]; ok {
		fn(payload)
		return
	}
	if channel == "" {
		for _, fn := range l.others {
			fn("")
		}
	}
	for _, e := range parse(channel, payload, l.readToken) {
		l.bus.Raise(e)
	}
}
