-- PostgreSQL, RowLock form, table shape 'processed-at-only', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: limit)
SELECT "id", "done", "payload" FROM "jobs" WHERE "done" IS NULL ORDER BY "id" LIMIT $1 FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE "jobs" SET "done" = statement_timestamp() WHERE "id" = $1

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: done, payload)
INSERT INTO "jobs" ("done", "payload") VALUES ($1, $2)

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
