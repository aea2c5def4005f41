// Package strategy is the strategy tree of DESIGN.md §5: its JSON forms, their validation,
// and what the queuer needs to run each building block as a streaming query.
package strategy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Kind names a building block.
type Kind string

// The building blocks.
const (
	Random      Kind = "random"
	OldestFirst Kind = "oldest_first"
	NewestFirst Kind = "newest_first"
)

// Default is the strategy of a request that names none.
var Default = Node{Kind: Random}

// Node is one node of a strategy tree.
type Node struct {
	Kind Kind
}

// String is the compact text form of the node.
func (n Node) String() string { return string(n.Kind) }

// Error is a validation error; Path names the offending node ("strategy.or_else.first").
type Error struct {
	Path    string
	Message string
}

func (e *Error) Error() string { return e.Path + ": " + e.Message }

// Parse reads a strategy's JSON form. path prefixes the node paths in errors, usually
// "strategy". Absent (empty or null) JSON is the default strategy.
func Parse(raw json.RawMessage, path string) (Node, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Default, nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		switch k := Kind(name); k {
		case Random, OldestFirst, NewestFirst:
			return Node{Kind: k}, nil
		}
		return Node{}, &Error{Path: path, Message: fmt.Sprintf("unknown strategy %q; known: random, oldest_first, newest_first", name)}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return Node{}, &Error{Path: path, Message: "must be a strategy name such as \"random\" or an object such as {\"select_only\": {…}}"}
	}
	for name := range obj {
		return Node{}, &Error{Path: path + "." + name, Message: "this strategy is not available yet; use random, oldest_first or newest_first"}
	}
	return Node{}, &Error{Path: path, Message: "an empty object names no strategy"}
}
