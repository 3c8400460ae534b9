-- PostgreSQL, Advisory form, table shape 'attempt-only', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: limit)
SELECT "id", "__lock" FROM (SELECT "id", concat('jobs-', COALESCE("id"::text, '')) AS "__lock" FROM "jobs" ORDER BY "id" OFFSET 0) AS __candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) LIMIT $1

-- ack (event ack; params: id)
DELETE FROM "jobs" WHERE "id" = $1

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: payload)
INSERT INTO "jobs" ("payload") VALUES ($1)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1 RETURNING "id", ("attempt" - 1) AS "attempt", "payload"

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
