package reserver

import "sort"

// Pairs is a reservation's strategic metadata prepared for the in-flight counts per value:
// the key and value pairs of [Reservation.Values] as a list, built once per submission
// outside the reserver's lock and shared by the reservations of its chunks, so that under
// the lock Reserve and Release only step one count per pair. Its zero value and nil hold
// no pair. A Pairs is read-only once made, and safe to share.
type Pairs struct {
	list []valuePair
}

// NewPairs prepares values (key -> canonical value text, as in [Reservation.Values]).
func NewPairs(values map[string]string) *Pairs {
	p := &Pairs{list: make([]valuePair, 0, len(values))}
	for k, v := range values {
		p.list = append(p.list, valuePair{k, v})
	}
	sort.Slice(p.list, func(i, j int) bool { return p.list[i].key < p.list[j].key })
	return p
}

// Len returns the number of pairs.
func (p *Pairs) Len() int {
	if p == nil {
		return 0
	}
	return len(p.list)
}
