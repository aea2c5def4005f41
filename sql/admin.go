package sql

import "embed"

// Admin holds the operators' recipes, admin/*.sql: short commented statements to run with
// psql, taking their arguments as psql variables, for example
//
//	psql "$OPSQ_DATABASE_URL" -v shard=17 -f sql/admin/force_release_shard.sql
//
//go:embed admin/*.sql
var Admin embed.FS
