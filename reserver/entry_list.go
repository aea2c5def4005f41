package reserver

// entryList is an intrusive doubly linked list of entries, in reservation order: the
// entries of one shard (shardLinks) or of one consumer name (consumerLinks), each list
// kind linking through its own pair of the entries' pointers. Linking through the entries
// themselves costs two pointers per reservation and list kind and no allocation per
// reservation, and lets an entry be unlinked in O(1).
type entryList struct {
	head, tail *entry
	n          int
	kind       int // shardLinks or consumerLinks: which of e.links this list uses
}

// The kinds of entryList, each an index into entry.links.
const (
	shardLinks = iota
	consumerLinks
	listKinds
)

// links are an entry's neighbours in one list.
type links struct{ prev, next *entry }

// pushBack appends e, which must not be in any list of l's kind.
func (l *entryList) pushBack(e *entry) {
	k := &e.links[l.kind]
	k.prev, k.next = l.tail, nil
	if l.tail != nil {
		l.tail.links[l.kind].next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

// remove unlinks e, which must be in l.
func (l *entryList) remove(e *entry) {
	k := &e.links[l.kind]
	if k.prev != nil {
		k.prev.links[l.kind].next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		k.next.links[l.kind].prev = k.prev
	} else {
		l.tail = k.prev
	}
	k.prev, k.next = nil, nil
	l.n--
}
