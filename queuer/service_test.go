package queuer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"opsq/reserver"
)

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
	services := []service{fakeService{"a", nil, &log}, fakeService{"b", nil, &log}, fakeService{"c", nil, &log}}
	if err := startAll(t.Context(), services); err != nil {
		t.Fatalf("startAll: %v", err)
	}
	stopAll(services)
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Errorf("calls %q; want %q", log, want)
	}
}

func TestStartAllStopsThoseStartedWhenOneFails(t *testing.T) {
	t.Parallel()
	var log []string
	boom := errors.New("boom")
	services := []service{fakeService{"a", nil, &log}, fakeService{"b", nil, &log}, fakeService{"c", boom, &log}, fakeService{"d", nil, &log}}
	if err := startAll(t.Context(), services); !errors.Is(err, boom) {
		t.Fatalf("startAll = %v; want the failing service's error", err)
	}
	want := []string{"start a", "start b", "start c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Errorf("calls %q; want %q (the failed one and those after it are not stopped)", log, want)
	}
}

// TestServicesStopBeforeStartAndTwice: every service of the queuer may be stopped before
// it starts, and twice.
func TestServicesStopBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]service{
		"listener":  newListener(nil, nil, nil),
		"keyring":   NewKeyring(nil, nil),
		"completer": newCompleter(nil, nil, nil, nil),
		"expirer":   newExpirer(nil, nil, nil),
		"cron jobs": &cronJobs{},
	} {
		t.Run(name, func(t *testing.T) {
			s.Stop()
			s.Stop()
		})
	}
}

// TestServicesStopEndsTheirGoroutines: Stop after Start ends the goroutines (goleak checks
// that none is left when the package's tests end), and a second Stop returns.
func TestServicesStopEndsTheirGoroutines(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]service{
		"keyring":   NewKeyring(nil, nil),
		"completer": newCompleter(nil, nil, nil, nil),
		"expirer":   newExpirer(reserver.New(reserver.Config{}), systemClock{}, nil),
		"cron jobs": &cronJobs{jobs: []cronJob{{what: "nothing", schedule: "@every 1h", run: func(context.Context) {}}}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Start(t.Context()); err != nil {
				t.Fatalf("Start: %v", err)
			}
			s.Stop()
			s.Stop()
		})
	}
}

func TestCronJobsRejectsABadSchedule(t *testing.T) {
	t.Parallel()
	j := &cronJobs{jobs: []cronJob{{what: "retention \"nonsense\"", schedule: "nonsense", run: func(context.Context) {}}}}
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
