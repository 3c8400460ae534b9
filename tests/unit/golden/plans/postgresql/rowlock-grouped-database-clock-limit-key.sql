-- PostgreSQL, RowLock form, table shape 'grouped', database-clock-limit-key
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, limit)
WITH __held AS MATERIALIZED (SELECT (l.classid::bigint << 32) | l.objid::bigint AS "__h" FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.pid <> pg_backend_pid() AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())), __due AS MATERIALIZED (SELECT "__k", COUNT(*) AS "__n", MIN("__place") AS "__first" FROM (SELECT "tenant" AS "__k", ROW_NUMBER() OVER (ORDER BY "id") AS "__place" FROM "jobs" WHERE "queue" = $1) AS __row GROUP BY "__k"), __keys AS MATERIALIZED (SELECT __due."__k", LEAST(__due."__n", 3) - (SELECT COUNT(*) FROM __held, generate_series(0, 2) AS __g("__i") WHERE __held."__h" = hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', quote_nullable(CAST(__due."__k" AS text)), ':', __g."__i"), 0)) AS "__free", __due."__first" FROM __due ORDER BY __due."__first"), __slots AS MATERIALIZED (SELECT __keys."__k", __got."__i" FROM __keys CROSS JOIN LATERAL (SELECT __g."__i" FROM generate_series(0, 2) AS __g("__i") WHERE pg_try_advisory_xact_lock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', quote_nullable(CAST(__keys."__k" AS text)), ':', __g."__i"), 0)) LIMIT GREATEST(__keys."__free", 0)) AS __got WHERE __keys."__free" > 0 LIMIT $2), __counts AS (SELECT "__k", COUNT(*) AS "__m" FROM __slots GROUP BY "__k") SELECT __got.* FROM __counts CROSS JOIN LATERAL (SELECT "id", "tenant", "queue", "payload" FROM "jobs" WHERE "queue" = $1 AND "tenant" IS NOT DISTINCT FROM __counts."__k" ORDER BY "id" LIMIT __counts."__m" FOR UPDATE SKIP LOCKED) AS __got ORDER BY __got."id"

-- ack (event ack; params: id)
DELETE FROM "jobs" WHERE "id" = $1

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: queue, payload, tenant)
INSERT INTO "jobs" ("queue", "payload", "tenant") VALUES ($1, $2, $3)

-- snooze: none

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
