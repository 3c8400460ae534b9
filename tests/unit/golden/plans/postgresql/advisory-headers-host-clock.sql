-- PostgreSQL, Advisory form, table shape 'headers', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: group, now, limit)
SELECT "id", "__lock" FROM (SELECT "id", concat('jobs-', COALESCE("id"::text, '')) AS "__lock" FROM "jobs" WHERE "queue" = $1 AND "due" <= $2 AND "done" IS NULL ORDER BY "due", "id" OFFSET 0) AS __candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) LIMIT $3

-- ack (event ack; params: now, id)
UPDATE "jobs" SET "done" = $1 WHERE "id" = $2

-- retry: none

-- retry_after (event retry_after; params: retry_at, id)
UPDATE "jobs" SET "due" = $1 WHERE "id" = $2

-- dead_letter[0] (event dead_letter; params: id)
WITH moved AS (DELETE FROM "jobs" WHERE "id" = $1 RETURNING "id", "queue", "due", "attempt", "done", "payload", "headers") INSERT INTO "jobs_dead" ("id", "queue", "due", "attempt", "done", "payload", "headers") SELECT "id", "queue", "due", "attempt", "done", "payload", "headers" FROM moved

-- insert (event insert; params: queue, done, payload, headers)
INSERT INTO "jobs" ("queue", "done", "payload", "headers") VALUES ($1, $2, $3, $4)

-- snooze (event snooze; params: retry_at, id)
UPDATE "jobs" SET "due" = $1, "attempt" = "attempt" - 1 WHERE "id" = $2

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group, now)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1 AND "queue" = $2 AND "due" <= $3 AND "done" IS NULL RETURNING "id", "queue", "due", ("attempt" - 1) AS "attempt", "done", "payload", "headers"

-- lock (event lock; params: key)
SELECT pg_try_advisory_lock(hashtextextended($1, 0))::int::bigint

-- unlock (event unlock; params: key)
SELECT pg_advisory_unlock(hashtextextended($1, 0))::int::bigint

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
