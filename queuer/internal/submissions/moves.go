package submissions

import (
	"fmt"
	"sync"
	"time"
)

// Pauses and resumes under a bound (issue 31, finding 12). A pause or a resume moves one
// row out and one in per chunk held (about 380 bytes of WAL per chunk): 9 pauses and 9
// resumes of a submission of 10^6 chunks wrote 6.8 GB of WAL in 80 s. Each caller (an API
// key, by its name; the requests without a key together) may move at most
// Config.MaxMovesPerMinute chunks by pauses and resumes in any minute on an instance, and
// one submission is paused or resumed by one request at a time on an instance; beyond,
// a *MoveBusyError says when to come back.

// MaxMovesPerMinuteDefault is the default of Config.MaxMovesPerMinute: a pause and a
// resume of a submission of 10^6 pending chunks a minute, about 760 MB of WAL.
const MaxMovesPerMinuteDefault = 2_000_000

// movesWindow is the window of MaxMovesPerMinute.
const movesWindow = time.Minute

// moveBusyRetry is the Retry-After of a pause or resume refused because another one of
// the same submission is moving its chunks.
const moveBusyRetry = 2 * time.Second

// MoveBusyError is a pause or a resume refused: another one of the same submission is
// under way, or the caller moved its share of chunks in the last minute.
type MoveBusyError struct {
	// Moving: another pause or resume of the submission is under way.
	Moving bool
	// Moved is what the caller moved in the last minute; Limit its bound.
	Moved, Limit int64
	// RetryAfter is when to try again.
	RetryAfter time.Duration
}

func (e *MoveBusyError) Error() string {
	if e.Moving {
		return "a pause or resume of this submission is moving its chunks now; try again when it has answered"
	}
	return fmt.Sprintf("this key moved %d chunks by pauses and resumes in the last minute, past its bound of %d (OPSQ_MAX_PAUSE_CHUNKS_PER_MINUTE): "+
		"each pause or resume writes every pending chunk out and back; pause or resume again in %s, and pause a large submission once rather than toggling it",
		e.Moved, e.Limit, e.RetryAfter.Round(time.Second))
}

// moves is the per-caller record of the chunks moved by pauses and resumes, and the
// submissions being moved now. Safe for concurrent use.
type moves struct {
	mu     sync.Mutex
	byKey  map[string][]moved // by caller, oldest first, within the window
	moving map[int64]bool
}

type moved struct {
	at time.Time
	n  int64
}

// begin takes submission id for a pause or resume by key, or says why not. end must
// follow a nil answer.
func (m *moves) begin(key string, id int64, limit int64, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.moving[id] {
		return &MoveBusyError{Moving: true, RetryAfter: moveBusyRetry}
	}
	list := m.trim(key, now)
	var total int64
	for _, e := range list {
		total += e.n
	}
	if total >= limit {
		// Come back when enough of the window has passed to bring the sum under the bound.
		sum, wait := total, time.Second
		for _, e := range list {
			sum -= e.n
			wait = max(e.at.Add(movesWindow).Sub(now), time.Second)
			if sum < limit {
				break
			}
		}
		return &MoveBusyError{Moved: total, Limit: limit, RetryAfter: wait}
	}
	if m.moving == nil {
		m.moving = map[int64]bool{}
	}
	m.moving[id] = true
	return nil
}

// end releases submission id and charges key with n chunks moved.
func (m *moves) end(key string, id int64, n int64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.moving, id)
	if n <= 0 {
		return
	}
	if m.byKey == nil {
		m.byKey = map[string][]moved{}
	}
	list := m.trim(key, now)
	if k := len(list) - 1; k >= 0 && now.Sub(list[k].at) < time.Second {
		list[k].n += n // one entry a second at most: a key's list holds at most 60
	} else {
		list = append(list, moved{at: now, n: n})
	}
	m.byKey[key] = list
}

// trim drops key's moves older than the window, and key itself when none is left; it
// returns what is left. The caller holds mu.
func (m *moves) trim(key string, now time.Time) []moved {
	list := m.byKey[key]
	i := 0
	for i < len(list) && now.Sub(list[i].at) >= movesWindow {
		i++
	}
	list = list[i:]
	if len(list) == 0 {
		delete(m.byKey, key)
		return nil
	}
	m.byKey[key] = list
	return list
}
