package sql

import _ "embed"

// ChunkInputs reads the inputs of a few chunks by key.
//
//go:embed chunk_inputs.sql
var ChunkInputs string
