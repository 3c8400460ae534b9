-- PostgreSQL, RowLock form, table shape 'plain', custom-claim
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim: none

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

-- take: none

-- lock: none

-- unlock: none

-- batch: none

-- release: none

-- extend: none

-- fetch (event fetch; params: ids)
SELECT "id", "payload" FROM "jobs" WHERE "id" = ANY($1)

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
