-- PostgreSQL, Advisory form, table shape 'retry-after-only', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: now, limit)
SELECT "id", "__lock" FROM (SELECT "id", concat('jobs-', COALESCE("id"::text, '')) AS "__lock" FROM "jobs" WHERE "due" <= $1 ORDER BY "due", "id" OFFSET 0) AS __candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) LIMIT $2

-- ack (event ack; params: id)
DELETE FROM "jobs" WHERE "id" = $1

-- retry: none

-- retry_after (event retry_after; params: retry_at, id)
UPDATE "jobs" SET "due" = $1 WHERE "id" = $2

-- dead_letter: none

-- insert (event insert; params: payload)
INSERT INTO "jobs" ("payload") VALUES ($1)

-- snooze (event snooze; params: retry_at, id)
UPDATE "jobs" SET "due" = $1 WHERE "id" = $2

-- guard: none

-- heads: none

-- take[0] (event take; params: id, now)
SELECT "id", "due", "payload" FROM "jobs" WHERE "id" = $1 AND "due" <= $2

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
