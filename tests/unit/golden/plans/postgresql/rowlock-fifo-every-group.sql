-- PostgreSQL, RowLock form, table shape 'fifo', every-group
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, now)
SELECT "id", "queue", "due", "attempt", "done", "payload" FROM "jobs" WHERE "id" = (SELECT "id" FROM "jobs" WHERE "queue" = $1 AND "done" IS NULL ORDER BY "id" LIMIT 1) AND "queue" = $1 AND "done" IS NULL AND "due" <= $2 FOR UPDATE SKIP LOCKED

-- ack (event ack; params: now, id)
UPDATE "jobs" SET "done" = $1 WHERE "id" = $2

-- retry (event retry; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- retry_after (event retry_after; params: retry_at, id)
UPDATE "jobs" SET "due" = $1, "attempt" = "attempt" + 1 WHERE "id" = $2

-- dead_letter: none

-- insert (event insert; params: queue, done, payload)
INSERT INTO "jobs" ("queue", "done", "payload") VALUES ($1, $2, $3)

-- snooze (event snooze; params: retry_at, id)
UPDATE "jobs" SET "due" = $1 WHERE "id" = $2

-- guard (event guard; params: group)
SELECT pg_try_advisory_xact_lock(hashtextextended('jobs:' || CAST($1 AS text), 0))::int::bigint

-- heads (event heads; params: now, limit)
SELECT __head."queue" FROM (SELECT DISTINCT "queue" AS __group FROM "jobs" WHERE "done" IS NULL) AS __groups JOIN "jobs" AS __head ON __head."id" = (SELECT __first."id" FROM "jobs" AS __first WHERE __first."queue" = __groups.__group AND __first."done" IS NULL ORDER BY __first."id" LIMIT 1) WHERE __head."due" <= $1 ORDER BY __head."id" LIMIT $2

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
