-- PostgreSQL, Lease form, table shape 'attempt-only', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: limit, lease_seconds)
WITH __claimed AS (SELECT "id", "attempt", "locked_until", "payload" FROM "jobs" WHERE ("locked_until" IS NULL OR "locked_until" <= statement_timestamp()) ORDER BY "id" LIMIT $1 FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "jobs" AS __row SET "locked_until" = to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $2::integer)), "attempt" = __row."attempt" + 1 FROM __claimed WHERE __row."id" = __claimed."id") SELECT *, to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $2::integer)) AS "__token" FROM __claimed ORDER BY "id"

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

-- extend[0] (event extend; params: lease_seconds, ids, tokens)
UPDATE "jobs" SET "locked_until" = to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $1::integer)) WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id", "locked_until" AS "__token"

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease_seconds, ids, tokens)
UPDATE "jobs" SET "locked_until" = to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $1::integer)) WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id", "locked_until" AS "__token"

-- rounds of 3 [0] (event extend; params: lease_seconds, ids, tokens)
UPDATE "jobs" SET "locked_until" = to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $1::integer)) WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id", "locked_until" AS "__token"
