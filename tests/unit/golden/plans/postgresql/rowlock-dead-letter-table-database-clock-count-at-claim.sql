-- PostgreSQL, RowLock form, table shape 'dead-letter-table', database-clock-count-at-claim
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, limit)
SELECT "id", "queue", "due", "attempt", "done", "payload" FROM "jobs" WHERE "queue" = $1 AND "due" <= statement_timestamp() AND "done" IS NULL ORDER BY "due", "id" LIMIT $2 FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE "jobs" SET "done" = statement_timestamp() WHERE "id" = $1

-- retry: none

-- retry_after (event retry_after; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond') WHERE "id" = $2

-- dead_letter[0] (event dead_letter; params: id)
WITH moved AS (DELETE FROM "jobs" WHERE "id" = $1 RETURNING "id", "queue", "due", "attempt", "done", "payload") INSERT INTO "jobs_dead" ("id", "queue", "due", "attempt", "done", "payload") SELECT "id", "queue", "due", "attempt", "done", "payload" FROM moved

-- insert (event insert; params: queue, done, payload)
INSERT INTO "jobs" ("queue", "done", "payload") VALUES ($1, $2, $3)

-- snooze (event snooze; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "attempt" = "attempt" - 1 WHERE "id" = $2

-- guard: none

-- heads: none

-- take[0] (event count; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- take[1] (event relock; params: id, group)
SELECT "id", "queue", "due", ("attempt" - 1) AS "attempt", "done", "payload" FROM "jobs" WHERE "id" = $1 AND "queue" = $2 AND "due" <= statement_timestamp() AND "done" IS NULL FOR UPDATE SKIP LOCKED

-- lock (event lock; params: key)
SELECT 1 FROM pg_advisory_lock(hashtextextended($1, 0))

-- unlock (event unlock; params: key)
SELECT pg_advisory_unlock(hashtextextended($1, 0))

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
