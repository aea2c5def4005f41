package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// readyLogEvery is how often at most a /readyz that stays not ready logs its reason.
const readyLogEvery = 10 * time.Second

// readyz answers GET /readyz: ready or not, nothing more. The reason an instance is not
// ready (the database unreachable, its host and port…) is for its operator: it goes to
// the log, never to whoever asks (DESIGN.md §8).
func (s *server) readyz(l *readyLog) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.cfg.Ready(c.Request().Context()); err != nil {
			l.notReady(c.Request().Context(), err)
			return &Error{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: "not ready", RetryAfter: RetryAfterDefault}
		}
		l.ready()
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	}
}

// readyLog logs why /readyz is not ready: at once when the reason changes, else at most
// every readyLogEvery. Safe for concurrent use.
type readyLog struct {
	log *slog.Logger
	mu  struct {
		sync.Mutex
		reason string
		at     time.Time
	}
}

func newReadyLog(log *slog.Logger) *readyLog { return &readyLog{log: log} }

func (l *readyLog) notReady(ctx context.Context, err error) {
	l.mu.Lock()
	now, reason := time.Now(), err.Error()
	if reason == l.mu.reason && now.Sub(l.mu.at) < readyLogEvery {
		l.mu.Unlock()
		return
	}
	l.mu.reason, l.mu.at = reason, now
	l.mu.Unlock()
	l.log.WarnContext(ctx, "not ready", slog.String("reason", reason))
}

func (l *readyLog) ready() {
	l.mu.Lock()
	l.mu.reason = ""
	l.mu.Unlock()
}
