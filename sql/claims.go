package sql

import _ "embed"

// Claims (package claims): renewal, balancing, acquisition and release of shards, and the
// cluster view of GET /v1/cluster.

//go:embed claims_renew.sql
var ClaimsRenew string

//go:embed claims_release_disabled.sql
var ClaimsReleaseDisabled string

//go:embed claims_balance.sql
var ClaimsBalance string

//go:embed claims_acquire.sql
var ClaimsAcquire string

//go:embed claims_release.sql
var ClaimsRelease string

//go:embed claims_drain_instance.sql
var ClaimsDrainInstance string

//go:embed claims_cluster.sql
var ClaimsCluster string

//go:embed claims_publish.sql
var ClaimsPublish string
