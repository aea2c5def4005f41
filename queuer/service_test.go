package queuer

import (
	"context"
	"testing"

	"opsq/queuer/internal/admin"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/outcome"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/startstop"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// TestServicesStopBeforeStartAndTwice: every service of the queuer may be stopped before
// it starts, and twice.
func TestServicesStopBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]startstop.Service{
		"sql listener":    opsqsql.NewListener(nil, nil, nil),
		"notify listener": notify.NewListener(nil, nil, &notify.Bus{}, nil, nil),
		"keyring":         tokens.NewKeyring(nil, nil),
		"outcomes":        outcome.New(outcome.Config{}),
		"cron jobs":       startstop.NewCron(),
		"activity writer": admin.NewActivityWriter(admin.ActivityConfig{}),
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
	for name, s := range map[string]startstop.Service{
		"keyring":   tokens.NewKeyring(nil, nil),
		"outcomes":  outcome.New(outcome.Config{Reserver: reserver.New(reserver.Config{})}),
		"cron jobs": startstop.NewCron(startstop.Job{What: "nothing", Schedule: "@every 1h", Run: func(context.Context) {}}),
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
