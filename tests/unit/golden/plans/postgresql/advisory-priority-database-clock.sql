-- PostgreSQL, Advisory form, table shape 'priority', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: group, limit)
SELECT "id", "__lock" FROM (SELECT "id", concat('jobs-', COALESCE("id"::text, '')) AS "__lock" FROM "jobs" WHERE "queue" = $1 AND "due" <= statement_timestamp() AND "done" IS NULL ORDER BY "priority", "due", "id" OFFSET 0) AS __candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) LIMIT $2

-- ack (event ack; params: id)
UPDATE "jobs" SET "done" = statement_timestamp() WHERE "id" = $1

-- retry: none

-- retry_after (event retry_after; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond') WHERE "id" = $2

-- dead_letter: none

-- insert (event insert; params: queue, priority, done, payload)
INSERT INTO "jobs" ("queue", "priority", "done", "payload") VALUES ($1, $2, $3, $4)

-- snooze (event snooze; params: delay, id)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "attempt" = "attempt" - 1 WHERE "id" = $2

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1 AND "queue" = $2 AND "due" <= statement_timestamp() AND "done" IS NULL RETURNING "id", "queue", "priority", "due", ("attempt" - 1) AS "attempt", "done", "payload"

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
