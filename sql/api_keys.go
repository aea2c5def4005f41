package sql

import _ "embed"

// API keys (apikeys).

//go:embed api_keys_load.sql
var APIKeysLoad string

//go:embed api_key_create.sql
var APIKeyCreate string

//go:embed api_keys_list.sql
var APIKeysList string

//go:embed api_key_revoke.sql
var APIKeyRevoke string

//go:embed api_keys_touch.sql
var APIKeysTouch string

//go:embed submission_created_by.sql
var SubmissionCreatedBy string
