-- PostgreSQL, RowLock form, table shape 'dead-letter-group-dated', count-at-claim
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, now, limit)
SELECT "id", "queue", "origin", "due", "attempt", "done", "died", "payload" FROM "jobs" WHERE "queue" = $1 AND "due" <= $2 AND "done" IS NULL ORDER BY "due", "id" LIMIT $3 FOR UPDATE SKIP LOCKED

-- ack (event ack; params: now, id)
UPDATE "jobs" SET "done" = $1 WHERE "id" = $2

-- retry: none

-- retry_after (event retry_after; params: retry_at, id)
UPDATE "jobs" SET "due" = $1 WHERE "id" = $2

-- dead_letter[0] (event dead_letter; params: dest, now, id)
UPDATE "jobs" SET "origin" = "queue", "queue" = $1, "died" = $2 WHERE "id" = $3

-- insert (event insert; params: queue, done, died, payload)
INSERT INTO "jobs" ("queue", "done", "died", "payload") VALUES ($1, $2, $3, $4)

-- snooze (event snooze; params: retry_at, id)
UPDATE "jobs" SET "due" = $1, "attempt" = "attempt" - 1 WHERE "id" = $2

-- guard: none

-- heads: none

-- take[0] (event count; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- take[1] (event relock; params: id, group, now)
SELECT "id", "queue", "origin", "due", ("attempt" - 1) AS "attempt", "done", "died", "payload" FROM "jobs" WHERE "id" = $1 AND "queue" = $2 AND "due" <= $3 AND "done" IS NULL FOR UPDATE SKIP LOCKED

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
