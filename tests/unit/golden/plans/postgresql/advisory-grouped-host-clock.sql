-- PostgreSQL, Advisory form, table shape 'grouped', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: group, limit)
SELECT "id", "__lock" FROM (SELECT "id", concat('jobs-', COALESCE("id"::text, '')) AS "__lock" FROM "jobs" WHERE "queue" = $1 ORDER BY "id" OFFSET 0) AS __candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) LIMIT $2

-- ack (event ack; params: id)
DELETE FROM "jobs" WHERE "id" = $1

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: queue, payload)
INSERT INTO "jobs" ("queue", "payload") VALUES ($1, $2)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group)
SELECT "id", "queue", "payload" FROM "jobs" WHERE "id" = $1 AND "queue" = $2

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
