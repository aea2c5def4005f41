package reserver

// DropSubmission removes and returns every reservation of the submission's chunks: the
// submission failed or was cancelled, and its chunks are gone. It walks all reservations
// (O(n)); submissions finish far less often than chunks.
func (r *Reserver) DropSubmission(submissionID int64) []Reservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Reservation
	for k, e := range r.mu.byKey {
		if k.SubmissionID == submissionID {
			out = append(out, e.res)
			r.removeLocked(e)
		}
	}
	return out
}
