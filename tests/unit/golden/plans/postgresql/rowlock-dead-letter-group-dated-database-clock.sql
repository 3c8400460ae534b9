-- PostgreSQL, RowLock form, table shape 'dead-letter-group-dated', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, limit)
SELECT "id", "queue", "origin", "due", "attempt", "done", "died", "payload" FROM "jobs" WHERE "queue" = $1 AND "due" <= statement_timestamp() AND "done" IS NULL ORDER BY "due", "id" LIMIT $2 FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE "jobs" SET "done" = statement_timestamp() WHERE "id" = $1

-- retry (event retry; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- retry_after (event retry_after; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "attempt" = "attempt" + 1 WHERE "id" = $2

-- dead_letter[0] (event dead_letter; params: dest, id)
UPDATE "jobs" SET "origin" = "queue", "queue" = $1, "died" = statement_timestamp() WHERE "id" = $2

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
