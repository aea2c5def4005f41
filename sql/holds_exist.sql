-- Whether any reservation holds a max_simultaneous slot (opsq.simultaneous_holds). A
-- reservation's slot is written and committed before its token is handed out, so a
-- complete batch that reads none here (before its complete statement) holds none among
-- its tokens: the completer then sends no tokens to free (PlanByKeyLock), about 0.3 µs of
-- PostgreSQL's time per chunk in the burn-down's harness (docs/capacity.md).
-- Citus: the coordinator's own table.
SELECT EXISTS (SELECT FROM opsq.simultaneous_holds)
