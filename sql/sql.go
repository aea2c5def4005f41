// Package sql holds the static SQL that opsq runs, one statement per file, named after what
// it does, and the operators' recipes under admin/, and is the one way of the engine to the
// database: Queries (db.go) runs each statement with its own parameter struct (…Params)
// and, where it returns rows, its own row struct (…Row); the database's errors are
// translated once (errors.go: ErrNotFound, *FenceError, IsUnavailable); Retry runs a
// transaction again under a named policy (retry.go). The variables below hold the
// statements' text.
package sql

import _ "embed"

// Notifications.

//go:embed notify.sql
var Notify string

// Settings.

//go:embed settings_load.sql
var SettingsLoad string

// Cluster keys (queuer.Keyring).

//go:embed cluster_keys_load.sql
var ClusterKeysLoad string

// Completions (queuer/complete.go).

//go:embed chunk_states.sql
var ChunkStates string

// Instances.

//go:embed instance_forget_stale.sql
var InstanceForgetStale string

//go:embed instance_register.sql
var InstanceRegister string

//go:embed instance_heartbeat.sql
var InstanceHeartbeat string

//go:embed instance_deregister.sql
var InstanceDeregister string

// Submissions.

//go:embed idempotency_claim.sql
var IdempotencyClaim string

//go:embed idempotency_lookup.sql
var IdempotencyLookup string

//go:embed submission_insert.sql
var SubmissionInsert string

//go:embed submission_insert_completed.sql
var SubmissionInsertCompleted string

//go:embed strategic_metadata_insert.sql
var StrategicMetadataInsert string

//go:embed submission_status.sql
var SubmissionStatus string

//go:embed submission_list.sql
var SubmissionList string

//go:embed submission_list_by_metadata.sql
var SubmissionListByMetadata string

//go:embed submission_cancel.sql
var SubmissionCancel string

//go:embed chunks_delete_submission.sql
var ChunksDeleteSubmission string

//go:embed results_stream.sql
var ResultsStream string

// Retention.

//go:embed retention_expired.sql
var RetentionExpired string

//go:embed retention_delete_chunks.sql
var RetentionDeleteChunks string

//go:embed retention_delete_submission.sql
var RetentionDeleteSubmission string
