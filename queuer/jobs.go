package queuer

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// cronJob is one periodic job: what runs, on which cron schedule; what names it in errors.
type cronJob struct {
	what     string
	schedule string
	run      func(context.Context)
}

// cronJobs owns the scheduler of the periodic jobs (retention, the collection of
// max_simultaneous holds): a job that is still running when its next turn comes skips that
// turn. Its goroutines live from Start until Stop, which waits for the running jobs;
// Start and Stop are for one goroutine at a time.
type cronJobs struct {
	jobs   []cronJob
	cron   *cron.Cron
	cancel context.CancelFunc
}

var _ service = (*cronJobs)(nil)

// Start schedules the jobs; it fails, scheduling none, on a schedule cron cannot read.
func (j *cronJobs) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := cron.New(cron.WithLocation(time.UTC), cron.WithChain(cron.SkipIfStillRunning(cron.DiscardLogger)))
	for _, job := range j.jobs {
		if _, err := c.AddFunc(job.schedule, func() { job.run(ctx) }); err != nil {
			cancel()
			return fmt.Errorf("scheduling %s: %w", job.what, err)
		}
	}
	c.Start()
	j.cron, j.cancel = c, cancel
	return nil
}

// Stop stops the scheduler and waits for the running jobs to end. Safe twice and before
// Start.
func (j *cronJobs) Stop() {
	if j.cron == nil {
		return
	}
	<-j.cron.Stop().Done()
	j.cancel()
}
