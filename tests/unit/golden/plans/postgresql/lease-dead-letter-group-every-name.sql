-- PostgreSQL, Lease form, table shape 'dead-letter-group', every-name
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: now, limit, lease)
WITH __claimed AS (SELECT "id", "queue", "origin", "due", "attempt", "locked_until", "done", "payload" FROM "jobs" WHERE "queue" <> 'dead' AND "due" <= $1 AND "done" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $1) ORDER BY "due", "id" LIMIT $2 FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "jobs" AS __row SET "locked_until" = $3, "attempt" = __row."attempt" + 1 FROM __claimed WHERE __row."id" = __claimed."id") SELECT * FROM __claimed ORDER BY "due", "id"

-- ack (event ack; params: now, id, token)
UPDATE "jobs" SET "done" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- retry (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- retry_after (event retry_after; params: retry_at, id, token)
UPDATE "jobs" SET "due" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- dead_letter[0] (event dead_letter; params: dest, id, token)
UPDATE "jobs" SET "origin" = "queue", "queue" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- insert (event insert; params: queue, locked_until, done, payload)
INSERT INTO "jobs" ("queue", "locked_until", "done", "payload") VALUES ($1, $2, $3, $4)

-- snooze (event snooze; params: retry_at, id, token)
UPDATE "jobs" SET "due" = $1, "attempt" = "attempt" - 1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch[0] (event ack; params: now, ids, token)
UPDATE "jobs" SET "done" = $1, "locked_until" = NULL WHERE "id" = ANY($2) AND "locked_until" = $3 RETURNING "id"

-- batch[1] (event retry; params: ids, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = ANY($1) AND "locked_until" = $2 RETURNING "id"

-- batch[2] (event retry_after; params: retry_at, ids, token)
UPDATE "jobs" SET "due" = $1, "locked_until" = NULL WHERE "id" = ANY($2) AND "locked_until" = $3 RETURNING "id"

-- batch[3] (event snooze; params: retry_at, ids, token)
UPDATE "jobs" SET "due" = $1, "attempt" = "attempt" - 1, "locked_until" = NULL WHERE "id" = ANY($2) AND "locked_until" = $3 RETURNING "id"

-- release (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- extend[0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"

-- rounds of 3 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"
