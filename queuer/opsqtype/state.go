package opsqtype

// State is the state of a submission: where its row is (DESIGN.md §1). The engine reads it
// from the opsq.submission_status view, the server answers it, and clients branch on it.
type State string

// Submission states.
const (
	StateInProgress State = "in_progress"
	StateCompleted  State = "completed"
	StateFailed     State = "failed"
	StateCancelled  State = "cancelled"
)

// States returns every submission state, in the order of a submission's life.
func States() []State {
	return []State{StateInProgress, StateCompleted, StateFailed, StateCancelled}
}

// Finished reports whether s is a final state.
func (s State) Finished() bool { return s != StateInProgress }
