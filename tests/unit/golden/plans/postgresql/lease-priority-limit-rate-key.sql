-- PostgreSQL, Lease form, table shape 'priority', limit-rate-key
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: rate_group, now, group, limit, lease)
WITH __tats AS (SELECT rate_key AS "__rk", tat AS "__tat" FROM "app_rates" WHERE tbl = 'jobs' AND grp = $1), __rated AS (SELECT __row."id" AS "__rid", ROW_NUMBER() OVER (PARTITION BY __row."tenant" ORDER BY __row."priority", __row."due", __row."id") AS "__rrank", (100 * (CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT) + 10000000 - GREATEST(COALESCE(__tats."__tat", CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)), CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)))) / 10000000 AS "__allow" FROM "jobs" AS __row LEFT JOIN __tats ON __tats."__rk" = COALESCE('v' || CAST(__row."tenant" AS TEXT), 'n') WHERE __row."queue" = $3 AND __row."due" <= $2 AND __row."done" IS NULL AND (__row."locked_until" IS NULL OR __row."locked_until" <= $2)), __window AS (SELECT __row."priority", __row."due", __row."id" FROM "jobs" AS __row WHERE __row."queue" = $3 AND __row."due" <= $2 AND __row."done" IS NULL AND (__row."locked_until" IS NULL OR __row."locked_until" <= $2) AND "id" IN (SELECT "__rid" FROM __rated WHERE "__rrank" <= "__allow") ORDER BY __row."priority", __row."due", __row."id" LIMIT 256), __fits AS (SELECT "priority", "due", "id", ROW_NUMBER() OVER (ORDER BY "priority", "due", "id") AS "__place" FROM __window), __take AS (SELECT "id" FROM __fits WHERE "__place" <= $4), __claimed AS (SELECT "id", "tenant", "queue", "priority", "due", "attempt", "locked_until", "done", "payload" FROM "jobs" WHERE "id" IN (SELECT "id" FROM __take) ORDER BY "priority", "due", "id" FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "jobs" AS __row SET "locked_until" = $5, "attempt" = __row."attempt" + 1 FROM __claimed WHERE __row."id" = __claimed."id") SELECT * FROM __claimed ORDER BY "priority", "due", "id"

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

-- limit_lock (event lock; params: none)
SELECT pg_advisory_xact_lock(hashtextextended('trinbox_limit:jobs', 0))

-- rate_advance (event rate; params: rate_group, now, starts, id)
INSERT INTO "app_rates" AS "__r" (tbl, grp, rate_key, tat) SELECT 'jobs', $1, COALESCE('v' || CAST("tenant" AS TEXT), 'n'), CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT) + ($3 * 10000000 + 99) / 100 FROM "jobs" WHERE "id" = $4 ON CONFLICT (tbl, grp, rate_key) DO UPDATE SET tat = GREATEST("__r".tat, CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)) + ($3 * 10000000 + 99) / 100

-- rate_key_index: 1

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"

-- rounds of 3 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"
