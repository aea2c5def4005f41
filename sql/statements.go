package sql

import (
	"context"
	"embed"
	"fmt"
	"time"
)

// Statements is the table of contents of the database's one face: every method of
// Queries, grouped by concern, one line each (River's riverdriver.Executor is the model).
// Each runs one statement file (or, where it says so, a few), which is embedded beside it
// in the file named. Nothing implements it but Queries; it is here to be read, and
// TestStatementsListEveryMethod keeps it complete.
type Statements interface {
	// Submissions (submissions.go): producing, reading and cancelling them.

	// IdempotencyClaim takes an idempotency key for a new submission.
	IdempotencyClaim(ctx context.Context, p IdempotencyClaimParams) (bool, error)
	// TxHoldLimit bounds how long the transaction it runs in may hold its locks.
	TxHoldLimit(ctx context.Context, limit time.Duration) error
	// IdempotencyLookup finds the submission that holds an idempotency key.
	IdempotencyLookup(ctx context.Context, p IdempotencyLookupParams) (int64, error)
	// SubmissionInsert inserts an in-progress submission.
	SubmissionInsert(ctx context.Context, p SubmissionInsertParams) error
	// ChunksCopy streams a submission's chunks in with COPY (copy.go).
	ChunksCopy(ctx context.Context, p ChunksCopyParams) (int64, error)
	// SubmissionInsertCompleted inserts a submission without chunks, completed at once.
	SubmissionInsertCompleted(ctx context.Context, p SubmissionInsertParams) error
	// StrategicMetadataInsert indexes a submission's strategic metadata.
	StrategicMetadataInsert(ctx context.Context, p StrategicMetadataInsertParams) error
	// SubmissionLifecycleInsert records a submission's lifecycle settings.
	SubmissionLifecycleInsert(ctx context.Context, p SubmissionLifecycleInsertParams) error
	// SubmissionTraceInsert records the traceparent a submission was sent with.
	SubmissionTraceInsert(ctx context.Context, p SubmissionTraceInsertParams) error
	// SubmissionStatus reads a submission's state.
	SubmissionStatus(ctx context.Context, p SubmissionStatusParams) (SubmissionStatusRow, error)
	// SubmissionList reads a page of submissions, by state or strategic metadata, at most
	// so many bytes.
	SubmissionList(ctx context.Context, p SubmissionListParams) ([]SubmissionStatusRow, bool, error)
	// SubmissionCancel moves an in-progress submission to submissions_cancelled.
	SubmissionCancel(ctx context.Context, p SubmissionCancelParams) (SubmissionCancelRow, error)
	// SubmissionEndedLock locks a cancelled or failed submission's row, before a slice of
	// its chunks is moved.
	SubmissionEndedLock(ctx context.Context, p SubmissionEndedLockParams) (string, error)
	// SubmissionsUnmoved lists the ended submissions whose move by slices was cut.
	SubmissionsUnmoved(ctx context.Context, p SubmissionsUnmovedParams) ([]SubmissionsUnmovedRow, error)
	// IngestBegin records a large object-storage submission going in by slices.
	IngestBegin(ctx context.Context, id int64, instance string, chunkCount int64) error
	// IngestEnd deletes that record, reporting whether there was one.
	IngestEnd(ctx context.Context, id int64) (bool, error)
	// IngestsDead lists the ingests by slices whose instance is gone.
	IngestsDead(ctx context.Context, limit int) ([]IngestsDeadRow, error)
	// SubmissionEndedSettle counts the uncounted rest of an ended submission as skipped.
	SubmissionEndedSettle(ctx context.Context, id int64, failed bool) (bool, error)
	// ResultsStream streams a submission's outputs in chunk order.
	ResultsStream(ctx context.Context, p ResultsStreamParams, fn func(ResultsStreamRow) error) error
	// SubmissionInfo reads what consumers get with the chunks of in-progress submissions.
	SubmissionInfo(ctx context.Context, p SubmissionInfoParams, fn func(SubmissionInfoRow) error) error
	// SelectOnlyAny finds the first in-progress submissions with a strategic value.
	SelectOnlyAny(ctx context.Context, p SelectOnlyAnyParams) ([]int64, error)
	// FairOthersAny finds the first in-progress submissions without any of a
	// weighted_fair ring's values.
	FairOthersAny(ctx context.Context, p FairOthersAnyParams) ([]int64, error)

	// Many small submissions at once (bulk.go): queuer.SubmitMany and CancelMany.

	// SubmissionsInsertMany is SubmissionInsert for many submissions.
	SubmissionsInsertMany(ctx context.Context, p SubmissionsInsertManyParams) error
	// StrategicMetadataInsertMany is StrategicMetadataInsert for many submissions.
	StrategicMetadataInsertMany(ctx context.Context, p StrategicMetadataInsertManyParams) error
	// SubmissionsCancel is SubmissionCancel for many, in one batch; it returns those moved.
	SubmissionsCancel(ctx context.Context, p SubmissionsCancelParams) ([]int64, error)
	// ChunksSkipSubmissions is ChunksSkipSubmission for many submissions.
	ChunksSkipSubmissions(ctx context.Context, p ChunksSkipSubmissionsParams) error
	// SubmissionsNotifyDropped tells the instances that submissions failed or were cancelled.
	SubmissionsNotifyDropped(ctx context.Context, p SubmissionsNotifyDroppedParams) error

	// Reserving (reserve.go): the candidate queries that package strategy compiles.

	// CandidatesStream runs a candidate query and streams its candidate chunks.
	CandidatesStream(ctx context.Context, p CandidatesStreamParams, fn func(CandidatesStreamRow) error) error

	// Chunks (chunks.go): inputs, completions, retries, failures, deletion, statistics.

	// ChunkInputs reads the inputs of a few chunks by key.
	ChunkInputs(ctx context.Context, p ChunkInputsParams, fn func(ChunkInputsRow) error) error
	// PlanByKey makes the rest of the transaction plan by primary key.
	PlanByKey(ctx context.Context) error
	// SubmissionsLock locks submissions in id order and returns those in progress.
	SubmissionsLock(ctx context.Context, ids []int64) ([]int64, error)
	// PlanByKeyLock is PlanByKey then SubmissionsLock, in one round trip, and tells
	// whether any max_simultaneous slot is held.
	PlanByKeyLock(ctx context.Context, ids []int64) (locked []int64, holds bool, err error)
	// ChunksComplete completes a batch of chunks.
	ChunksComplete(ctx context.Context, p ChunksCompleteParams) ([]ChunksCompleteRow, error)
	// SubmissionsFinishCompleted moves the submissions whose every chunk is done.
	SubmissionsFinishCompleted(ctx context.Context, p SubmissionsFinishCompletedParams) error
	// ChunkRetry counts a failed attempt and makes the chunk reservable again, at once or
	// after its backoff (fenced).
	ChunkRetry(ctx context.Context, p ChunkRetryParams) (ChunkRetried, error)
	// ChunksPromote makes the waiting chunks that are due reservable.
	ChunksPromote(ctx context.Context, p ChunksPromoteParams) ([]int, error)
	// ChunkFail fails a chunk for good; its submission's failure policy decides the rest
	// (fenced).
	ChunkFail(ctx context.Context, p ChunkFailParams) (ChunkFailed, error)
	// ChunkState reads where one chunk is.
	ChunkState(ctx context.Context, p ChunkStateParams) (ChunkStateRow, error)
	// ChunkAttemptError reads the error recorded for one of a chunk's last failed attempts.
	ChunkAttemptError(ctx context.Context, p ChunkAttemptErrorParams) (string, error)
	// ChunkStates tells which of many chunks opsq knows, in one statement.
	ChunkStates(ctx context.Context, p ChunkStatesParams) ([]bool, error)
	// ChunksSkipSubmission deletes the reservable chunks of a submission.
	ChunksSkipSubmission(ctx context.Context, p ChunksSkipSubmissionParams) error
	// ChunksSkipRange moves a range of a cancelled or failed submission's pending chunks to
	// chunks_failed, skipped, and counts them (a slice of a large cancel or fail).
	ChunksSkipRange(ctx context.Context, p ChunksSkipRangeParams) (int64, error)
	// ChunksDeleteRange removes a range of the chunks of a submission that was never
	// inserted whole (an object-storage submission cut between its slices).
	ChunksDeleteRange(ctx context.Context, p ChunksDeleteRangeParams) error
	// ChunksStatsStale tells whether the planner's row count of the chunks lags far behind.
	ChunksStatsStale(ctx context.Context, minRows, ingested int64) (bool, error)
	// ChunksAnalyze runs ANALYZE on the chunks.
	ChunksAnalyze(ctx context.Context) error

	// The failure lifecycle (lifecycle.go): results in any state, failures, retry, pause.

	// ResultsRange streams a submission's finished chunks in chunk order, from an index on.
	ResultsRange(ctx context.Context, p ResultsRangeParams, fn func(ResultsRangeRow) error) error
	// SubmissionLockAny locks a submission's row in whichever table it is.
	SubmissionLockAny(ctx context.Context, p SubmissionLockAnyParams) (SubmissionLockAnyRow, error)
	// ChunksFailedUnplaced reads failed chunks that have no shard (failed before 00007).
	ChunksFailedUnplaced(ctx context.Context, p ChunksFailedUnplacedParams) ([]int32, error)
	// ChunksFailedPlace writes the shard and random order of those.
	ChunksFailedPlace(ctx context.Context, p ChunksFailedPlaceParams) error
	// ChunksRetryFailed makes a submission's failed (or skipped) chunks pending again.
	ChunksRetryFailed(ctx context.Context, p ChunksRetryFailedParams) ([]ChunksRetryFailedRow, error)
	// SubmissionRetryCounters fixes an in-progress submission's counters after a retry.
	SubmissionRetryCounters(ctx context.Context, p SubmissionRetryParams) error
	// SubmissionReopen moves a finished submission back in progress for a retry.
	SubmissionReopen(ctx context.Context, p SubmissionRetryParams) error
	// ChunkErrorsPage reads a page of the chunks that failed an attempt.
	ChunkErrorsPage(ctx context.Context, p ChunkErrorsPageParams) ([]int32, error)
	// ChunkFailures reads the state, retries and last errors of such chunks.
	ChunkFailures(ctx context.Context, p ChunkFailuresParams) ([]ChunkFailuresRow, error)
	// SubmissionPause pauses an in-progress submission: its pending chunks wait.
	SubmissionPause(ctx context.Context, p SubmissionPauseParams) (int64, error)
	// SubmissionResume resumes it: the chunks its pause held are reservable again.
	SubmissionResume(ctx context.Context, p SubmissionPauseParams) ([]SubmissionResumeRow, error)

	// Dependencies (dependencies.go): submissions after other submissions.

	// DependenciesCheck reads the state of each parent of a new child.
	DependenciesCheck(ctx context.Context, p DependenciesCheckParams) ([]DependenciesCheckRow, error)
	// DependenciesInsert records a new child's policy and parents.
	DependenciesInsert(ctx context.Context, p DependenciesInsertParams) error
	// DependentsDue reads the waiting children that may start or must be cancelled now.
	DependentsDue(ctx context.Context, p DependentsDueParams) ([]DependentsDueRow, error)
	// DependentStart marks a waiting child as waiting no more, before its chunks move in.
	DependentStart(ctx context.Context, id int64) (started bool, chunksTotal int64, err error)
	// DependentCancel marks a waiting child as cancelled by a parent, before its cancel.
	DependentCancel(ctx context.Context, p DependentCancelParams) (bool, error)
	// DependentsRearm reads the children that a retry of their parent marked to re-arm.
	DependentsRearm(ctx context.Context, p DependentsRearmParams) ([]DependentsRearmRow, error)
	// DependentsRearmMark, in a retry of a parent, marks the children it cancelled to re-arm.
	DependentsRearmMark(ctx context.Context, parent int64) (bool, error)
	// DependentsParents reads the parents that have children to act on.
	DependentsParents(ctx context.Context) (DependentsParentsRow, error)
	// DependentRetry makes a retried child wait on its parents again when they do not let
	// it start.
	DependentRetry(ctx context.Context, id int64) (DependentRetryRow, error)
	// DependenciesStatus reads a child's policy, parents and the parents it waits on.
	DependenciesStatus(ctx context.Context, id int64) (DependenciesStatusRow, error)

	// Retention (retention.go).

	// RetentionExpired finds submissions finished before a cutoff.
	RetentionExpired(ctx context.Context, p RetentionExpiredParams) ([]int64, error)
	// RetentionDeleteChunks deletes a batch of a finished submission's chunk rows.
	RetentionDeleteChunks(ctx context.Context, p RetentionDeleteChunksParams) (int64, error)
	// RetentionDeleteSubmission deletes a finished submission.
	RetentionDeleteSubmission(ctx context.Context, p RetentionDeleteSubmissionParams) error

	// The cluster as queuer sees it (cluster.go, throttles.go): owners, peers, keys, holds,
	// throttles.

	// ShardOwner reads who holds a shard.
	ShardOwner(ctx context.Context, p ShardOwnerParams) (ShardOwnerRow, error)
	// PeersWithWork reads the other live instances and their shards with work.
	PeersWithWork(ctx context.Context, p PeersWithWorkParams) ([]PeersWithWorkRow, error)
	// ClusterKeysLoad reads the cluster keys that still verify.
	ClusterKeysLoad(ctx context.Context, p ClusterKeysLoadParams) ([]ClusterKeysLoadRow, error)
	// HoldsTake takes a max_simultaneous slot.
	HoldsTake(ctx context.Context, p HoldsTakeParams) (bool, error)
	// HoldsRelease frees the slots of reservations that are over.
	HoldsRelease(ctx context.Context, p HoldsReleaseParams) error
	// HoldsCollect deletes the holds that stopped counting.
	HoldsCollect(ctx context.Context) error
	// ThrottleSet sets a throttle of a strategic value (POST /v1/throttle).
	ThrottleSet(ctx context.Context, p ThrottleSetParams) (time.Time, error)
	// ThrottleLock orders the setters of throttles counted against the same bounds.
	ThrottleLock(ctx context.Context, locks []int64) error
	// ThrottleBounds counts the throttles a new one is counted against.
	ThrottleBounds(ctx context.Context, p ThrottleBoundsParams) ([]ThrottleBoundsRow, error)
	// ThrottleLift lifts throttles before their end (DELETE /v1/throttle).
	ThrottleLift(ctx context.Context, p ThrottleLiftParams) (int64, error)
	// ThrottlesLoad reads the throttles in force, what an instance caches.
	ThrottlesLoad(ctx context.Context) ([]ThrottlesLoadRow, error)
	// ThrottleOwners lists the other instances that may hand out chunks.
	ThrottleOwners(ctx context.Context, instance string) ([]string, error)
	// ThrottlesCollect deletes the throttles that ended.
	ThrottlesCollect(ctx context.Context) error
	// RateTake leases tokens of a rate_limit bucket.
	RateTake(ctx context.Context, p RateTakeParams) (int, error)
	// RateCollect deletes the rate buckets that are full again.
	RateCollect(ctx context.Context) error
	// RateBucketsList reads the rate_limit buckets in use, for the dashboard.
	RateBucketsList(ctx context.Context, p RateBucketsListParams) ([]RateBucketsListRow, error)

	// Schedules (schedules.go): the schedules of tenants and their runs (DESIGN.md §3).

	// ScheduleInsert creates a schedule, within its tenant's bound and unique by name.
	ScheduleInsert(ctx context.Context, d ScheduleDef, max int) (ScheduleInsertRow, error)
	// ScheduleTenantLock orders the creates of a tenant's schedules (in a transaction).
	ScheduleTenantLock(ctx context.Context, tenant string) error
	// ScheduleReplace replaces a schedule's definition.
	ScheduleReplace(ctx context.Context, d ScheduleDef) error
	// ScheduleDelete deletes a schedule and its runs.
	ScheduleDelete(ctx context.Context, tenant, name string) error
	// ScheduleGet reads one schedule.
	ScheduleGet(ctx context.Context, tenant, name string) (ScheduleRow, error)
	// ScheduleList reads a page of schedules.
	ScheduleList(ctx context.Context, p ScheduleListParams) ([]ScheduleRow, error)
	// SchedulePause pauses or resumes a schedule.
	SchedulePause(ctx context.Context, tenant, name string, paused bool, next time.Time) error
	// DatabaseNow reads the database's clock.
	DatabaseNow(ctx context.Context) (time.Time, error)
	// SchedulesDue leases the schedules whose run is due.
	SchedulesDue(ctx context.Context, p SchedulesDueParams) ([]SchedulesDueRow, error)
	// ScheduleRunsRecord records what runs of a schedule did.
	ScheduleRunsRecord(ctx context.Context, id int64, runs []ScheduleRun) error
	// ScheduleRunsPrune deletes a schedule's older runs.
	ScheduleRunsPrune(ctx context.Context, id int64, keep int) error
	// ScheduleRunsList reads a schedule's last runs.
	ScheduleRunsList(ctx context.Context, id int64, limit int) ([]ScheduleRun, error)
	// ScheduleRunsSubmitted tells which scheduled times of a schedule were submitted.
	ScheduleRunsSubmitted(ctx context.Context, id int64, times []time.Time) ([]time.Time, error)
	// ScheduleLastSubmission records a schedule's last submission (a trigger's, a backfill's).
	ScheduleLastSubmission(ctx context.Context, id, submissionID int64) error
	// SchedulesAdvance moves a leased batch of schedules on and records their runs.
	SchedulesAdvance(ctx context.Context, leaseID int64, moves []ScheduleMove) (moved, kept []int64, err error)
	// SubmissionsInProgress says which of ids are submissions still in progress.
	SubmissionsInProgress(ctx context.Context, ids []int64) ([]int64, error)

	// Claims (claims.go): the shards' owners, for package claims.

	// ClaimsTimeouts sets the short timeouts of a claims transaction.
	ClaimsTimeouts(ctx context.Context, p ClaimsTimeoutsParams) error
	// TransactionSettings reads the isolation and timeouts of the transaction.
	TransactionSettings(ctx context.Context) (TransactionSettingsRow, error)
	// ClaimsRenew renews the shards held, fenced by their generations.
	ClaimsRenew(ctx context.Context, p ClaimsRenewParams) ([]int, error)
	// ClaimsBalance reads the live instances and enabled shards.
	ClaimsBalance(ctx context.Context, p ClaimsBalanceParams) (ClaimsBalanceRow, error)
	// ClaimsAcquire takes free or expired shards.
	ClaimsAcquire(ctx context.Context, p ClaimsAcquireParams) ([]ClaimsAcquireRow, error)
	// ClaimsPlacements reads the Citus node of each shard's chunks.
	ClaimsPlacements(ctx context.Context) ([]ClaimsPlacementRow, error)
	// ClaimsRelease gives shards back, fenced by their generations.
	ClaimsRelease(ctx context.Context, p ClaimsReleaseParams) ([]int, error)
	// ClaimsPublish publishes the in-flight counts, fenced by the generations.
	ClaimsPublish(ctx context.Context, p ClaimsPublishParams) ([]int, error)
	// ClaimsDrainInstance marks the instance draining.
	ClaimsDrainInstance(ctx context.Context, p ClaimsInstanceParams) error
	// ClaimsReleaseDisabled releases the disabled shards the instance holds.
	ClaimsReleaseDisabled(ctx context.Context, p ClaimsInstanceParams) error
	// ClaimsCluster reads the instances and the claims table together.
	ClaimsCluster(ctx context.Context) ([]ClaimsClusterRow, error)

	// Instances and settings (instances.go), for package claims.

	// InstanceRegister adds the instance under the lowest free node id.
	InstanceRegister(ctx context.Context, p InstanceRegisterParams) (int, error)
	// InstanceHeartbeat marks the instance alive and reads whether it drains.
	InstanceHeartbeat(ctx context.Context, p InstanceHeartbeatParams) (draining bool, err error)
	// InstanceDeregister deletes the instance's row.
	InstanceDeregister(ctx context.Context, p InstanceDeregisterParams) error
	// InstanceForgetStale deletes the instances silent too long.
	InstanceForgetStale(ctx context.Context, p InstanceForgetStaleParams) error
	// SettingsLoad reads opsq.settings.
	SettingsLoad(ctx context.Context) ([]SettingsLoadRow, error)

	// Notifications (db.go).

	// Notify sends a payload on a channel (pg_notify).
	Notify(ctx context.Context, p NotifyParams) error

	// Metrics (metrics.go) and the dashboard (dashboard.go, admin.go).

	// ClusterStats reads the cluster's figures for the metrics and the dashboard.
	ClusterStats(ctx context.Context, p ClusterStatsParams) (ClusterStatsRow, error)
	// DashboardOverview reads the dashboard's own figures.
	DashboardOverview(ctx context.Context, p DashboardOverviewParams) (DashboardOverviewRow, error)
	// DashboardRetries reads the failed attempts so far of a submission's chunks.
	DashboardRetries(ctx context.Context, p DashboardRetriesParams) (int64, error)
	// DashboardChildren reads the first children of a submission, with their states.
	DashboardChildren(ctx context.Context, p DashboardChildrenParams) ([]DashboardChildrenRow, error)
	// ChunkDetail reads where one chunk is and the start of its input and output.
	ChunkDetail(ctx context.Context, p ChunkDetailParams) (ChunkDetailRow, error)
	// ActivityAdd adds an instance's completions and failed attempts to the current minute.
	ActivityAdd(ctx context.Context, p ActivityAddParams) error
	// ActivityMinutes reads the completions and failed attempts per minute of the last 24 h.
	ActivityMinutes(ctx context.Context) ([]ActivityMinutesRow, error)
	// ConsumerActivityWrite replaces an instance's summary of its top consumers and of
	// its top values' rates.
	ConsumerActivityWrite(ctx context.Context, p ConsumerActivityWriteParams) error
	// ConsumerActivity reads the instances' fresh summaries of their consumers.
	ConsumerActivity(ctx context.Context, p ConsumerActivityParams) ([]ConsumerActivityRow, error)
	// ValueRates reads the instances' fresh top values' rates.
	ValueRates(ctx context.Context, p ValueRatesParams) ([]ValueRatesRow, error)
	// AdminDrainInstance runs the recipe admin/drain_instance.sql.
	AdminDrainInstance(ctx context.Context, p AdminInstanceParams) (bool, error)
	// AdminUndrainInstance runs the recipe admin/undrain_instance.sql.
	AdminUndrainInstance(ctx context.Context, p AdminInstanceParams) (bool, error)
	// AdminDisableShard runs the recipe admin/disable_shard.sql.
	AdminDisableShard(ctx context.Context, p AdminShardParams) (bool, error)
	// AdminEnableShard runs the recipe admin/enable_shard.sql.
	AdminEnableShard(ctx context.Context, p AdminShardParams) (bool, error)

	// Tenants (tenants.go): quotas, usage, a submission's tenant.

	// TenantLock locks a tenant's quotas for a submit's check.
	TenantLock(ctx context.Context, p TenantParams) (TenantQuota, error)
	// TenantUsage counts what a tenant has in progress.
	TenantUsage(ctx context.Context, p TenantParams) (TenantUsageRow, error)
	// TenantSet sets a tenant's quotas.
	TenantSet(ctx context.Context, p TenantSetParams) (TenantRow, error)
	// TenantsList reads the tenants, their quotas and usage.
	TenantsList(ctx context.Context) ([]TenantsListRow, error)
	// TenantSubmissions reads the first submissions in progress of some tenants.
	TenantSubmissions(ctx context.Context, p TenantSubmissionsParams) ([]TenantSubmissionsRow, error)
	// SubmissionTenants reads the tenants of some submissions.
	SubmissionTenants(ctx context.Context, p SubmissionTenantsParams) ([]SubmissionTenantsRow, error)
	// SubmissionTenantIn reads a submission's tenant if it is one of some tenants: an
	// unknown id and another tenant's miss alike.
	SubmissionTenantIn(ctx context.Context, p SubmissionTenantInParams) (SubmissionTenantsRow, error)

	// API keys (api_keys.go), for package apikeys.

	// APIKeyCreate adds a key.
	APIKeyCreate(ctx context.Context, p APIKeyCreateParams) (APIKeyRow, error)
	// APIKeysList reads every key, without the hashes.
	APIKeysList(ctx context.Context) ([]APIKeyRow, error)
	// APIKeyRevoke revokes a key by name.
	APIKeyRevoke(ctx context.Context, p APIKeyRevokeParams) (APIKeyRow, error)
	// APIKeysLoad reads every key with its hash, what an instance caches.
	APIKeysLoad(ctx context.Context) ([]APIKeysLoadRow, error)
	// APIKeysTouch records that keys were used.
	APIKeysTouch(ctx context.Context, p APIKeysTouchParams) error
	// UISessionCreate, UISessionKey and UISessionEnd keep the dashboard's sessions.
	UISessionCreate(ctx context.Context, p UISessionParams) error
	UISessionKey(ctx context.Context, p UISessionParams) (int64, error)
	UISessionEnd(ctx context.Context, p UISessionParams) error
}

var _ Statements = Queries{}

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
