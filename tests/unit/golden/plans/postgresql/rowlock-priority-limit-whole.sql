-- PostgreSQL, RowLock form, table shape 'priority', limit-whole
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, limit, now)
WITH __held AS MATERIALIZED (SELECT (l.classid::bigint << 32) | l.objid::bigint AS "__h" FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.pid <> pg_backend_pid() AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())), __whole AS MATERIALIZED (SELECT "__i" FROM (SELECT __g."__i" FROM generate_series(0, 19) AS __g("__i") WHERE pg_try_advisory_xact_lock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', '*', ':', __g."__i"), 0)) LIMIT LEAST($2, GREATEST(((SELECT COUNT(*) FROM "jobs" WHERE "queue" = $1 AND "due" <= $3 AND "done" IS NULL) - (SELECT COUNT(*) FROM __held, generate_series(0, 19) AS __g("__i") WHERE __held."__h" = hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', '*', ':', __g."__i"), 0))), 0))) AS __got) SELECT "id", "tenant", "queue", "priority", "due", "attempt", "done", "payload" FROM "jobs" WHERE "queue" = $1 AND "due" <= $3 AND "done" IS NULL ORDER BY "priority", "due", "id" LIMIT (SELECT COUNT(*) FROM __whole) FOR UPDATE SKIP LOCKED

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
