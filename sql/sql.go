// Package sql holds the static SQL that opsq runs, one statement per file named after
// what it does, and the operators' recipes under admin/, and is the engine's one face to
// the database: Queries (db.go) runs each statement through a method of its own, with its
// own parameter struct (…Params) and, where it returns rows, its own row struct (…Row), so
// that no caller holds a statement's text, builds its arguments by name or scans its
// columns by position. Each statement is embedded, unexported, in the file of its group
// beside the method that runs it; statements.go lists every method (Statements). The
// candidate queries, which package strategy compiles, run through one method too
// (CandidatesStream).
//
// The database's errors are translated once (errors.go: ErrNotFound, *FenceError,
// IsUnavailable); Retry runs a transaction again under a named policy (retry.go). Source
// gives the text of a statement file to the tests and tools that recognize a statement,
// and Admin the recipes to those that run them as psql would.
package sql
