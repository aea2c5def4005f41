package queuer

import "context"

// service is the one lifecycle shape of the queuer's background parts (the listener, the
// keyring, the completer, the expirer, the claims manager, the cron jobs). Start starts
// its goroutines and returns once the part is ready; ctx bounds Start's own work, not the
// goroutines, which live until Stop. Stop ends them and waits; it is safe twice and safe
// before Start.
type service interface {
	Start(ctx context.Context) error
	Stop()
}

// startAll starts services in order; when one fails it stops those started, in reverse
// order, and returns its error.
func startAll(ctx context.Context, services []service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			stopAll(services[:i])
			return err
		}
	}
	return nil
}

// stopAll stops services in reverse order.
func stopAll(services []service) {
	for i := len(services) - 1; i >= 0; i-- {
		services[i].Stop()
	}
}

// loop is the goroutine of a part that runs one: embed it, call start from the part's
// Start, and the part's Stop is loop's. The goroutine's context ends at Stop, not with
// Start's ctx.
type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs run on a goroutine until Stop.
func (l *loop) start(ctx context.Context, run func(ctx context.Context)) {
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		run(ctx)
	}()
}

// Stop ends the goroutine and waits for it. Safe twice and before start.
func (l *loop) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}
