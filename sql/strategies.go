package sql

import _ "embed"

// select_only.

//go:embed select_only_any.sql
var SelectOnlyAny string

// max_simultaneous holds.

//go:embed holds_take.sql
var HoldsTake string

//go:embed holds_release.sql
var HoldsRelease string

//go:embed holds_collect.sql
var HoldsCollect string
