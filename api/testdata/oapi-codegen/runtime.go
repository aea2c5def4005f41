// Package oapicodegen is a tools module: it pins oapi-codegen (a tool of this module) and
// the runtime module that the Go client it generates imports, so that api's
// TestOpenAPIGoClient generates a client from the served document and compiles it with
// exactly these versions (go.sum holds their hashes).
package oapicodegen

import _ "github.com/oapi-codegen/runtime"
