-- PostgreSQL, Lease form, table shape 'fifo-priority', limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: now, group, limit, lease)
WITH __live AS (SELECT "tenant" AS "__key", COUNT(*) AS "__count" FROM "jobs" WHERE "done" IS NULL AND "locked_until" > $1 GROUP BY "tenant"), __window AS (SELECT __row."priority", __row."due", __row."id", __row."tenant" FROM "jobs" AS __row WHERE "id" = (SELECT "id" FROM "jobs" WHERE "queue" = $2 AND "done" IS NULL ORDER BY "priority", "id" LIMIT 1) AND "queue" = $2 AND "done" IS NULL AND "due" <= $1 AND ("locked_until" IS NULL OR "locked_until" <= $1) AND NOT EXISTS (SELECT 1 FROM "jobs" AS __work WHERE __work."queue" = $2 AND __work."locked_until" > $1) AND (__row."tenant" IS NULL OR __row."tenant" NOT IN (SELECT __live."__key" FROM __live WHERE __live."__key" IS NOT NULL AND __live."__count" >= 3)) AND (__row."tenant" IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live."__key" IS NULL AND __live."__count" >= 3)) ORDER BY __row."priority", __row."id" LIMIT 256), __ranked AS (SELECT __row."priority", __row."due", __row."id", ROW_NUMBER() OVER (PARTITION BY __row."tenant" ORDER BY __row."priority", __row."id") AS "__rank", COALESCE(__live."__count", CASE WHEN __row."tenant" IS NULL THEN (SELECT "__count" FROM __live WHERE "__key" IS NULL) END, 0) AS "__used" FROM __window AS __row LEFT JOIN __live ON __live."__key" = __row."tenant"), __fits AS (SELECT "priority", "due", "id", ROW_NUMBER() OVER (ORDER BY "priority", "id") AS "__place" FROM __ranked WHERE "__rank" + "__used" <= 3), __take AS (SELECT "id" FROM __fits WHERE "__place" <= $3 AND "__place" + (SELECT COUNT(*) FROM "jobs" WHERE "done" IS NULL AND "locked_until" > $1) <= 20), __claimed AS (SELECT "id", "tenant", "queue", "priority", "due", "attempt", "locked_until", "done", "payload" FROM "jobs" WHERE "id" IN (SELECT "id" FROM __take) ORDER BY "priority", "due", "id" FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "jobs" AS __row SET "locked_until" = $4, "attempt" = __row."attempt" + 1 FROM __claimed WHERE __row."id" = __claimed."id") SELECT * FROM __claimed ORDER BY "priority", "due", "id"

-- ack (event ack; params: now, id, token)
UPDATE "jobs" SET "done" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- retry (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- retry_after (event retry_after; params: retry_at, id, token)
UPDATE "jobs" SET "due" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- dead_letter: none

-- insert (event insert; params: queue, priority, locked_until, done, payload, tenant)
INSERT INTO "jobs" ("queue", "priority", "locked_until", "done", "payload", "tenant") VALUES ($1, $2, $3, $4, $5, $6)

-- snooze (event snooze; params: retry_at, id, token)
UPDATE "jobs" SET "due" = $1, "attempt" = "attempt" - 1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- guard (event guard; params: group)
SELECT pg_try_advisory_xact_lock(hashtextextended('jobs:' || CAST($1 AS text), 0))::int::bigint

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

-- limit_lock (event lock; params: none)
SELECT pg_advisory_xact_lock(hashtextextended('trinbox_limit:jobs', 0))

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"

-- rounds of 3 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"
