-- plan_by_key.sql on Citus, without its generic plans: Citus routes a statement by the
-- values of its parameters, which a generic plan does not have ("could not create
-- distributed plan"). The statements it plans carry no partitions to prune there.
-- Citus: the Citus form of plan_by_key.sql (layout.go, PlanByKey): settings of the
-- transaction, no table.
SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off
