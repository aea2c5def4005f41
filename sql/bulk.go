package sql

import _ "embed"

// Many small submissions at once (queuer.SubmitMany, queuer.CancelMany), for tools such as
// the benchmark.

// SubmissionsInsertMany is submission_insert.sql for many submissions.
//
//go:embed submissions_insert_many.sql
var SubmissionsInsertMany string

// StrategicMetadataInsertMany is strategic_metadata_insert.sql for many submissions.
//
//go:embed strategic_metadata_insert_many.sql
var StrategicMetadataInsertMany string

// ChunksDeleteSubmissions is chunks_delete_submission.sql for many submissions.
//
//go:embed chunks_delete_submissions.sql
var ChunksDeleteSubmissions string

// SubmissionsNotifyDropped sends queuer's notifyDropped notifications for many submissions.
//
//go:embed submissions_notify_dropped.sql
var SubmissionsNotifyDropped string
