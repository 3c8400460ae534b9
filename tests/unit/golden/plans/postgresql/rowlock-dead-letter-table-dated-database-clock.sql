-- PostgreSQL, RowLock form, table shape 'dead-letter-table-dated', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, limit)
SELECT "id", "queue", "due", "attempt", "done", "died", "payload" FROM "jobs" WHERE "queue" = $1 AND "due" <= statement_timestamp() AND "done" IS NULL ORDER BY "due", "id" LIMIT $2 FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE "jobs" SET "done" = statement_timestamp() WHERE "id" = $1

-- retry (event retry; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- retry_after (event retry_after; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "attempt" = "attempt" + 1 WHERE "id" = $2

-- dead_letter[0] (event dead_letter; params: id)
WITH moved AS (DELETE FROM "jobs" WHERE "id" = $1 RETURNING "id", "queue", "due", "attempt", "done", "died", "payload") INSERT INTO "jobs_dead" ("id", "queue", "due", "attempt", "done", "died", "payload") SELECT "id", "queue", "due", "attempt", "done", statement_timestamp(), "payload" FROM moved

-- insert (event insert; params: queue, done, died, payload)
INSERT INTO "jobs" ("queue", "done", "died", "payload") VALUES ($1, $2, $3, $4)

-- snooze (event snooze; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond') WHERE "id" = $2

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
