package sql

import (
	"embed"
	"fmt"
)

// sources holds the text of every statement file, for Source.
//
//go:embed *.sql
var sources embed.FS

// Source returns the text of the statement file named file ("holds_take.sql"), as the
// statement is sent to the database; it panics when there is no such file. It is for tests
// and tools that recognize a statement (by its text or its first line, in a trace or in
// pg_stat_statements); run statements through Queries.
func Source(file string) string {
	b, err := sources.ReadFile(file)
	if err != nil {
		panic(fmt.Sprintf("sql.Source: no statement file %q", file))
	}
	return string(b)
}
