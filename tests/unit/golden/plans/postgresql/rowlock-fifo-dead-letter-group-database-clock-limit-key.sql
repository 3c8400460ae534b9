-- PostgreSQL, RowLock form, table shape 'fifo-dead-letter-group', database-clock-limit-key
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group)
WITH __head AS MATERIALIZED (SELECT "tenant" AS "__k" FROM "jobs" WHERE "id" = (SELECT "id" FROM "jobs" WHERE "queue" = $1 AND "done" IS NULL ORDER BY "id" LIMIT 1) AND "queue" = $1 AND "done" IS NULL AND "due" <= statement_timestamp()), __slot AS MATERIALIZED (SELECT 1 FROM __head CROSS JOIN LATERAL (SELECT __g."__i" FROM generate_series(0, 2) AS __g("__i") WHERE pg_try_advisory_xact_lock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST(__head."__k" AS text)), ':', __g."__i"), 0)) LIMIT 1) AS __got) SELECT "id", "tenant", "queue", "origin", "due", "attempt", "done", "payload" FROM "jobs" WHERE "id" = (SELECT "id" FROM "jobs" WHERE "queue" = $1 AND "done" IS NULL ORDER BY "id" LIMIT 1) AND "queue" = $1 AND "done" IS NULL AND "due" <= statement_timestamp() AND EXISTS (SELECT 1 FROM __slot) FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE "jobs" SET "done" = statement_timestamp() WHERE "id" = $1

-- retry (event retry; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- retry_after (event retry_after; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "attempt" = "attempt" + 1 WHERE "id" = $2

-- dead_letter[0] (event dead_letter; params: dest, id)
UPDATE "jobs" SET "origin" = "queue", "queue" = $1 WHERE "id" = $2

-- insert (event insert; params: queue, done, payload, tenant)
INSERT INTO "jobs" ("queue", "done", "payload", "tenant") VALUES ($1, $2, $3, $4)

-- snooze (event snooze; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond') WHERE "id" = $2

-- guard (event guard; params: group)
SELECT pg_try_advisory_xact_lock(hashtextextended('jobs:' || CAST($1 AS text), 0))::int::bigint

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
