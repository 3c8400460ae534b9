-- PostgreSQL, Lease form, table shape 'plain', limit-key
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: now, limit, lease)
WITH __live AS (SELECT "tenant" AS "__key", COUNT(*) AS "__count" FROM "jobs" WHERE "locked_until" > $1 GROUP BY "tenant"), __window AS (SELECT __row."id", __row."tenant" FROM "jobs" AS __row WHERE (__row."locked_until" IS NULL OR __row."locked_until" <= $1) AND (__row."tenant" IS NULL OR __row."tenant" NOT IN (SELECT __live."__key" FROM __live WHERE __live."__key" IS NOT NULL AND __live."__count" >= 3)) AND (__row."tenant" IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live."__key" IS NULL AND __live."__count" >= 3)) ORDER BY __row."id" LIMIT 256), __ranked AS (SELECT __row."id", ROW_NUMBER() OVER (PARTITION BY __row."tenant" ORDER BY __row."id") AS "__rank", COALESCE(__live."__count", CASE WHEN __row."tenant" IS NULL THEN (SELECT "__count" FROM __live WHERE "__key" IS NULL) END, 0) AS "__used" FROM __window AS __row LEFT JOIN __live ON __live."__key" = __row."tenant"), __fits AS (SELECT "id", ROW_NUMBER() OVER (ORDER BY "id") AS "__place" FROM __ranked WHERE "__rank" + "__used" <= 3), __take AS (SELECT "id" FROM __fits WHERE "__place" <= $2), __claimed AS (SELECT "id", "tenant", "locked_until", "payload" FROM "jobs" WHERE "id" IN (SELECT "id" FROM __take) ORDER BY "id" FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "jobs" AS __row SET "locked_until" = $3 FROM __claimed WHERE __row."id" = __claimed."id") SELECT * FROM __claimed ORDER BY "id"

-- ack (event ack; params: id, token)
DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2

-- retry (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: locked_until, payload, tenant)
INSERT INTO "jobs" ("locked_until", "payload", "tenant") VALUES ($1, $2, $3)

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

-- fetch: none

-- stamp: none

-- lease_token: none

-- limit_lock (event lock; params: none)
SELECT pg_advisory_xact_lock(hashtextextended('trinbox_limit:jobs', 0))

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"

-- rounds of 3 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"
