-- PostgreSQL, Lease form, table shape 'plain', custom-claim
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim: none

-- ack (event ack; params: id, token)
DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2

-- retry (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: locked_until, payload)
INSERT INTO "jobs" ("locked_until", "payload") VALUES ($1, $2)

-- snooze: none

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch[0] (event ack; params: ids, token)
DELETE FROM "jobs" WHERE "id" = ANY($1) AND "locked_until" = $2 RETURNING "id"

-- batch[1] (event retry; params: ids, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = ANY($1) AND "locked_until" = $2 RETURNING "id"

-- release (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- extend[0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"

-- fetch (event fetch; params: ids)
SELECT "id", "locked_until", "payload" FROM "jobs" WHERE "id" = ANY($1)

-- stamp (event stamp; params: lease, id, now)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND ("locked_until" IS NULL OR "locked_until" <= $3)

-- lease_token: none

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"

-- rounds of 3 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"
