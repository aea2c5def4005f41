package queuer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// listener holds one connection that LISTENs on a fixed set of channels and hands every
// notification to handle. When the connection breaks it reconnects with backoff, and calls
// handle with an empty channel name: notifications may have been missed, so whoever
// waits on one should look again. Its goroutine lives from Start until Stop.
type listener struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	handle   func(channel, payload string)
	channels []string

	cancel context.CancelFunc
	done   chan struct{}
}

func newListener(pool *pgxpool.Pool, log *slog.Logger, handle func(channel, payload string), channels ...string) *listener {
	return &listener{pool: pool, log: log, handle: handle, channels: channels}
}

var _ service = (*listener)(nil)

// Start connects and listens; it returns once the first LISTEN is in place, so that no
// notification sent after Start returns is missed. ctx bounds the first connection only.
func (l *listener) Start(ctx context.Context) error {
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
func (l *listener) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
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

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
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

// waiters owns the channels of the goroutines waiting on a key (WaitFinished: a
// submission id), and wakes them. Safe for concurrent use.
type waiters struct {
	mu struct {
		sync.Mutex
		byKey map[int64]map[chan struct{}]struct{}
	}
}

func newWaiters() *waiters {
	w := &waiters{}
	w.mu.byKey = map[int64]map[chan struct{}]struct{}{}
	return w
}

// add registers a waiter on key; the channel is closed when key is woken. Call the
// returned function to unregister.
func (w *waiters) add(key int64) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.mu.byKey[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.mu.byKey[key] = set
	}
	set[ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.mu.byKey[key]; ok {
			delete(set, ch)
			if len(set) == 0 {
				delete(w.mu.byKey, key)
			}
		}
	}
}

// wake closes the channels of key's waiters.
func (w *waiters) wake(key int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.mu.byKey[key] {
		close(ch)
	}
	delete(w.mu.byKey, key)
}

// wakeAll closes every waiter's channel.
func (w *waiters) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, set := range w.mu.byKey {
		for ch := range set {
			close(ch)
		}
	}
	w.mu.byKey = map[int64]map[chan struct{}]struct{}{}
}
