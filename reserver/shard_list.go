package reserver

// shardList is an intrusive doubly linked list of the entries of one shard,
// in reservation order. Linking through the entries themselves costs two
// pointers per reservation and no allocation per reservation, and lets an
// entry be unlinked in O(1).
type shardList struct {
	head, tail *entry
	n          int
}

// pushBack appends e, which must not be in any list.
func (l *shardList) pushBack(e *entry) {
	e.prev = l.tail
	e.next = nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

// remove unlinks e, which must be in l.
func (l *shardList) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
	l.n--
}

// consumerList is the same list through the entries' cprev and cnext: the entries of
// one consumer name, in reservation order.
type consumerList struct {
	head, tail *entry
	n          int
}

// pushBack appends e, which must not be in any consumer's list.
func (l *consumerList) pushBack(e *entry) {
	e.cprev = l.tail
	e.cnext = nil
	if l.tail != nil {
		l.tail.cnext = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

// remove unlinks e, which must be in l.
func (l *consumerList) remove(e *entry) {
	if e.cprev != nil {
		e.cprev.cnext = e.cnext
	} else {
		l.head = e.cnext
	}
	if e.cnext != nil {
		e.cnext.cprev = e.cprev
	} else {
		l.tail = e.cprev
	}
	e.cprev, e.cnext = nil, nil
	l.n--
}
