-- PostgreSQL, RowLock form, table shape 'fifo-priority', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group)
SELECT "id", "queue", "priority", "due", "attempt", "done", "payload" FROM "jobs" WHERE "id" = (SELECT "id" FROM "jobs" WHERE "queue" = $1 AND "done" IS NULL ORDER BY "priority", "id" LIMIT 1) AND "queue" = $1 AND "done" IS NULL AND "due" <= statement_timestamp() FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE "jobs" SET "done" = statement_timestamp() WHERE "id" = $1

-- retry (event retry; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- retry_after (event retry_after; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "attempt" = "attempt" + 1 WHERE "id" = $2

-- dead_letter: none

-- insert (event insert; params: queue, priority, done, payload)
INSERT INTO "jobs" ("queue", "priority", "done", "payload") VALUES ($1, $2, $3, $4)

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
