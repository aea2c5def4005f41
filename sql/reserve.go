package sql

import _ "embed"

// Reserving (the candidate queries are built by strategy.CandidateQuery), completing and
// failing chunks.

//go:embed submission_info.sql
var SubmissionInfo string

//go:embed plan_by_key.sql
var PlanByKey string

//go:embed submissions_lock.sql
var SubmissionsLock string

//go:embed chunks_complete.sql
var ChunksComplete string

//go:embed submissions_finish_completed.sql
var SubmissionsFinishCompleted string

//go:embed chunk_retry.sql
var ChunkRetry string

//go:embed chunk_fail.sql
var ChunkFail string

//go:embed chunk_state.sql
var ChunkState string

//go:embed chunk_partitions_stale.sql
var ChunkPartitionsStale string

//go:embed shard_owner.sql
var ShardOwner string

//go:embed peers_with_work.sql
var PeersWithWork string
