// Package startstop is the one shape of the engine's background parts: the NOTIFY listener,
// the keyring's refresh, the completer, the expirer, the claims loop and the cron jobs
// (retention, the collection of max_simultaneous holds, the planner's statistics) each
// are a Service. Start starts its goroutines and returns once the part is ready; Stop ends
// them and waits; Stop is safe twice and safe before Start. The queuer starts its services
// in order (StartAll) and stops them in reverse (StopAll).
//
// It holds no state of its own and does no I/O: Loop is the goroutine of a part that runs
// one, and Cron the scheduler of periodic jobs (robfig/cron/v3).
package startstop

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Service is a background part. ctx bounds Start's own work, not the goroutines, which
// live until Stop.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// StartAll starts services in order; when one fails it stops those started, in reverse
// order, and returns its error.
func StartAll(ctx context.Context, services []Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			StopAll(services[:i])
			return err
		}
	}
	return nil
}

// StopAll stops services in reverse order.
func StopAll(services []Service) {
	for i := len(services) - 1; i >= 0; i-- {
		services[i].Stop()
	}
}

// Loop is the goroutine of a part that runs one: embed it, call Go from the part's Start,
// and the part's Stop is Loop's. The goroutine's context ends at Stop, not with Start's
// ctx. Go and Stop are for one goroutine at a time.
type Loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Go runs run on a goroutine until Stop.
func (l *Loop) Go(ctx context.Context, run func(ctx context.Context)) {
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		run(ctx)
	}()
}

// Stop ends the goroutine and waits for it. Safe twice and before Go.
func (l *Loop) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

// Job is one periodic job: what runs, on which cron schedule; What names it in errors.
type Job struct {
	What     string
	Schedule string
	Run      func(context.Context)
}

// Cron is the Service that runs periodic jobs: a job that is still running when its next
// turn comes skips that turn. Its goroutines live from Start until Stop, which waits for
// the running jobs.
type Cron struct {
	jobs   []Job
	cron   *cron.Cron
	cancel context.CancelFunc
}

var _ Service = (*Cron)(nil)

// NewCron returns the scheduler of jobs; Start it.
func NewCron(jobs ...Job) *Cron { return &Cron{jobs: jobs} }

// Start schedules the jobs; it fails, scheduling none, on a schedule cron cannot read.
func (j *Cron) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := cron.New(cron.WithLocation(time.UTC), cron.WithChain(cron.SkipIfStillRunning(cron.DiscardLogger)))
	for _, job := range j.jobs {
		if _, err := c.AddFunc(job.Schedule, func() { job.Run(ctx) }); err != nil {
			cancel()
			return fmt.Errorf("scheduling %s: %w", job.What, err)
		}
	}
	c.Start()
	j.cron, j.cancel = c, cancel
	return nil
}

// Stop stops the scheduler and waits for the running jobs to end. Safe twice and before
// Start.
func (j *Cron) Stop() {
	if j.cron == nil {
		return
	}
	<-j.cron.Stop().Done()
	j.cancel()
}
