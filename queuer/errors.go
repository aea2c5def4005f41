package queuer

import opsqsql "opsq/sql"

// ErrUnavailable means the database cannot be reached now (it is down, restarting, or
// refusing connections): the request may succeed if retried a little later. The API
// answers 503 with Retry-After, never 500 (DESIGN.md §3). It is package sql's, where the
// database's errors are translated once (sql/errors.go); the api reads it here, with
// the engine's other errors.
var ErrUnavailable = opsqsql.ErrUnavailable

// IsUnavailable reports whether err means that the database cannot be reached now: it is
// sql.IsUnavailable, which recognizes driver errors wherever they come from, so that no
// call site has to translate them.
func IsUnavailable(err error) bool { return opsqsql.IsUnavailable(err) }
