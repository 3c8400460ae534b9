-- PostgreSQL, RowLock form, table shape 'priority', limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, now, limit)
WITH __held AS MATERIALIZED (SELECT (l.classid::bigint << 32) | l.objid::bigint AS "__h" FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.pid <> pg_backend_pid() AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())), __due AS MATERIALIZED (SELECT "__k", COUNT(*) AS "__n", MIN("__place") AS "__first" FROM (SELECT "tenant" AS "__k", ROW_NUMBER() OVER (ORDER BY "priority", "due", "id") AS "__place" FROM "jobs" WHERE "queue" = $1 AND "due" <= $2 AND "done" IS NULL) AS __row GROUP BY "__k"), __keys AS MATERIALIZED (SELECT __due."__k", LEAST(__due."__n", 3) - (SELECT COUNT(*) FROM __held, generate_series(0, 2) AS __g("__i") WHERE __held."__h" = hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', quote_nullable(CAST(__due."__k" AS text)), ':', __g."__i"), 0)) AS "__free", __due."__first" FROM __due ORDER BY __due."__first"), __whole AS MATERIALIZED (SELECT "__i" FROM (SELECT __g."__i" FROM generate_series(0, 19) AS __g("__i") WHERE pg_try_advisory_xact_lock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', '*', ':', __g."__i"), 0)) LIMIT LEAST($3, GREATEST((SELECT COALESCE(SUM(GREATEST("__free", 0)), 0) FROM __keys), 0))) AS __got), __slots AS MATERIALIZED (SELECT __keys."__k", __got."__i" FROM __keys CROSS JOIN LATERAL (SELECT __g."__i" FROM generate_series(0, 2) AS __g("__i") WHERE pg_try_advisory_xact_lock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', quote_nullable(CAST(__keys."__k" AS text)), ':', __g."__i"), 0)) LIMIT GREATEST(__keys."__free", 0)) AS __got WHERE __keys."__free" > 0 LIMIT (SELECT COUNT(*) FROM __whole)), __counts AS (SELECT "__k", COUNT(*) AS "__m" FROM __slots GROUP BY "__k") SELECT __got.* FROM __counts CROSS JOIN LATERAL (SELECT "id", "tenant", "queue", "priority", "due", "attempt", "done", "payload" FROM "jobs" WHERE "queue" = $1 AND "due" <= $2 AND "done" IS NULL AND "tenant" IS NOT DISTINCT FROM __counts."__k" ORDER BY "priority", "due", "id" LIMIT __counts."__m" FOR UPDATE SKIP LOCKED) AS __got ORDER BY __got."priority", __got."due", __got."id"

-- ack (event ack; params: now, id)
UPDATE "jobs" SET "done" = $1 WHERE "id" = $2

-- retry (event retry; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- retry_after (event retry_after; params: retry_at, id)
UPDATE "jobs" SET "due" = $1, "attempt" = "attempt" + 1 WHERE "id" = $2

-- dead_letter: none

-- insert (event insert; params: queue, priority, done, payload, tenant)
INSERT INTO "jobs" ("queue", "priority", "done", "payload", "tenant") VALUES ($1, $2, $3, $4, $5)

-- snooze (event snooze; params: retry_at, id)
UPDATE "jobs" SET "due" = $1 WHERE "id" = $2

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
