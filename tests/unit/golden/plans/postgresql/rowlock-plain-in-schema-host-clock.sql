-- PostgreSQL, RowLock form, table shape 'plain-in-schema', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: limit)
SELECT "id", "payload" FROM "app"."jobs" ORDER BY "id" LIMIT $1 FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
DELETE FROM "app"."jobs" WHERE "id" = $1

-- retry: none

-- retry_after: none

-- dead_letter[0] (event dead_letter; params: id)
WITH moved AS (DELETE FROM "app"."jobs" WHERE "id" = $1 RETURNING "id", "payload") INSERT INTO "app"."jobs_dead" ("id", "payload") SELECT "id", "payload" FROM moved

-- insert (event insert; params: payload)
INSERT INTO "app"."jobs" ("payload") VALUES ($1)

-- snooze: none

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
