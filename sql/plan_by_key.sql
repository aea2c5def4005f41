-- For the rest of the transaction, plan as statements that touch a few chunks by primary
-- key (a batch of completions): when the chunk table is small (or its statistics stale)
-- the planner would rather hash the batch and read the whole table. And plan each
-- statement once per connection: a custom plan of the complete statement, planned for
-- every batch, cost a third of PostgreSQL's CPU in a burn-down when the chunks had 64
-- partitions (perf). On one table (migration 00026) planning costs less, and in the
-- harness of docs/capacity.md the complete statement cost the same with these settings,
-- with the generic plan alone, with none, and with the two without the generic plan (65–83
-- ticks for 200 batches each, within the runs' spread); they stay for the small and the
-- stale tables, and because a generic plan is made once per connection, not per batch.
-- One statement of set_config(…, true) (SET LOCAL), not three SETs: it can go in one round
-- trip with the statements after it (PlanByKeyLock).
-- Citus: has a Citus form (plan_by_key_citus.sql): the same settings without force_generic_plan, since a generic plan cannot be routed.
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true)
