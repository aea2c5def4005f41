package startstop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeService records its Start and Stop calls in log.
type fakeService struct {
	name string
	fail error
	log  *[]string
}

func (f fakeService) Start(context.Context) error {
	*f.log = append(*f.log, "start "+f.name)
	return f.fail
}

func (f fakeService) Stop() { *f.log = append(*f.log, "stop "+f.name) }

func TestStartAllStopAll(t *testing.T) {
	t.Parallel()
	var log []string
	services := []Service{fakeService{"a", nil, &log}, fakeService{"b", nil, &log}, fakeService{"c", nil, &log}}
	if err := StartAll(t.Context(), services); err != nil {
		t.Fatalf("StartAll: %v", err)
	}
	StopAll(services)
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Errorf("calls %q; want %q", log, want)
	}
}

func TestStartAllStopsThoseStartedWhenOneFails(t *testing.T) {
	t.Parallel()
	var log []string
	boom := errors.New("boom")
	services := []Service{fakeService{"a", nil, &log}, fakeService{"b", nil, &log}, fakeService{"c", boom, &log}, fakeService{"d", nil, &log}}
	if err := StartAll(t.Context(), services); !errors.Is(err, boom) {
		t.Fatalf("StartAll = %v; want the failing service's error", err)
	}
	want := []string{"start a", "start b", "start c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Errorf("calls %q; want %q (the failed one and those after it are not stopped)", log, want)
	}
}

func TestLoopStopEndsTheGoroutine(t *testing.T) {
	t.Parallel()
	var l Loop
	l.Stop() // before Go: returns
	ran := make(chan struct{})
	l.Go(t.Context(), func(ctx context.Context) {
		close(ran)
		<-ctx.Done()
	})
	<-ran
	l.Stop()
	l.Stop()
}

func TestCronStopBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	j := NewCron(Job{What: "nothing", Schedule: "@every 1h", Run: func(context.Context) {}})
	j.Stop()
	if err := j.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	j.Stop()
	j.Stop()
}

func TestCronRejectsABadSchedule(t *testing.T) {
	t.Parallel()
	j := NewCron(Job{What: "retention \"nonsense\"", Schedule: "nonsense", Run: func(context.Context) {}})
	err := j.Start(t.Context())
	if err == nil {
		j.Stop()
		t.Fatal("Start with a bad schedule: nil error; want one naming the job")
	}
	if !strings.Contains(err.Error(), `scheduling retention "nonsense"`) {
		t.Errorf("Start with a bad schedule: %v; want an error naming the job", err)
	}
	j.Stop() // nothing started: returns
}
