-- PostgreSQL, RowLock form, table shape 'attempt-only', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: limit)
SELECT "id", "attempt", "payload" FROM "jobs" ORDER BY "id" LIMIT $1 FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
DELETE FROM "jobs" WHERE "id" = $1

-- retry (event retry; params: id)
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: payload)
INSERT INTO "jobs" ("payload") VALUES ($1)

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
