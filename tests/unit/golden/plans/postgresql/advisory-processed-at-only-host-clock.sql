-- PostgreSQL, Advisory form, table shape 'processed-at-only', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: limit)
SELECT "id", "__lock" FROM (SELECT "id", concat('jobs-', COALESCE("id"::text, '')) AS "__lock" FROM "jobs" WHERE "done" IS NULL ORDER BY "id" OFFSET 0) AS __candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) LIMIT $1

-- ack (event ack; params: now, id)
UPDATE "jobs" SET "done" = $1 WHERE "id" = $2

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: done, payload)
INSERT INTO "jobs" ("done", "payload") VALUES ($1, $2)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id)
SELECT "id", "done", "payload" FROM "jobs" WHERE "id" = $1 AND "done" IS NULL

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
