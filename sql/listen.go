package sql

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The one LISTEN loop of an instance's parts (the queuer's notifications, the API keys'
// changes): each part has its own Listener, so that one's channels and handling stay its
// own, but the reconnecting is written once.

// Listener holds one connection that LISTENs on a fixed set of channels and hands every
// notification to handle. When the connection breaks it reconnects with backoff, and calls
// handle with an empty channel name: notifications may have been missed, so whoever
// waits on one should look again. Its goroutine lives from Start until Stop.
type Listener struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	handle   func(channel, payload string)
	channels []string

	cancel context.CancelFunc
	done   chan struct{}
}

// NewListener returns a Listener of channels on a connection of its own, made from pool's
// configuration (never one of the pool's: requests cannot delay a notification).
func NewListener(pool *pgxpool.Pool, log *slog.Logger, handle func(channel, payload string), channels ...string) *Listener {
	return &Listener{pool: pool, log: log, handle: handle, channels: channels}
}

// Start connects and listens; it returns once the first LISTEN is in place, so that no
// notification sent after Start returns is missed. ctx bounds the first connection only.
func (l *Listener) Start(ctx context.Context) error {
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	var runCtx context.Context
	runCtx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go l.run(runCtx, conn)
	return nil
}

// Stop ends the goroutine and closes the connection. Safe twice and before Start.
func (l *Listener) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	for _, ch := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			conn.Close(context.Background())
			return nil, err
		}
	}
	return conn, nil
}

func (l *Listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				if ctx.Err() != nil {
					return
				}
				l.log.Warn("notification listener lost its connection; reconnecting", slog.Any("error", err))
				break
			}
			backoff = 100 * time.Millisecond
			l.handle(n.Channel, n.Payload)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		var err error
		if conn, err = l.connect(ctx); err != nil {
			conn = nil
			continue
		}
		l.handle("", "") // something may have been missed while disconnected
	}
}
