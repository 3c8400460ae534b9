-- PostgreSQL, Lease form, table shape 'full', limit-rate-all
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: rate_group, now, group, limit, lease)
WITH __tats AS (SELECT rate_key AS "__rk", tat AS "__tat" FROM "ops"."app_rates" WHERE tbl = 'jobs' AND grp = $1), __rated AS (SELECT __row."id" AS "__rid", ROW_NUMBER() OVER (PARTITION BY __row."tenant" ORDER BY __row."due", __row."id") AS "__rrank", (3 * (CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT) + 1000000 - GREATEST(COALESCE(__tats."__tat", CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)), CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)))) / 1000000 AS "__allow" FROM "jobs" AS __row LEFT JOIN __tats ON __tats."__rk" = COALESCE('v' || CAST(__row."tenant" AS TEXT), 'n') WHERE __row."queue" = $3 AND __row."due" <= $2 AND __row."done" IS NULL AND (__row."locked_until" IS NULL OR __row."locked_until" <= $2)), __live AS (SELECT "tenant" AS "__key", COUNT(*) AS "__count" FROM "jobs" WHERE "queue" = $3 AND "done" IS NULL AND "locked_until" > $2 GROUP BY "tenant"), __window AS (SELECT __row."due", __row."id", __row."tenant" FROM "jobs" AS __row WHERE __row."queue" = $3 AND __row."due" <= $2 AND __row."done" IS NULL AND (__row."locked_until" IS NULL OR __row."locked_until" <= $2) AND "id" IN (SELECT "__rid" FROM __rated WHERE "__rrank" <= "__allow") AND (__row."tenant" IS NULL OR __row."tenant" NOT IN (SELECT __live."__key" FROM __live WHERE __live."__key" IS NOT NULL AND __live."__count" >= 3)) AND (__row."tenant" IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live."__key" IS NULL AND __live."__count" >= 3)) ORDER BY __row."due", __row."id" LIMIT 256), __ranked AS (SELECT __row."due", __row."id", ROW_NUMBER() OVER (PARTITION BY __row."tenant" ORDER BY __row."due", __row."id") AS "__rank", COALESCE(__live."__count", CASE WHEN __row."tenant" IS NULL THEN (SELECT "__count" FROM __live WHERE "__key" IS NULL) END, 0) AS "__used" FROM __window AS __row LEFT JOIN __live ON __live."__key" = __row."tenant"), __fits AS (SELECT "due", "id", ROW_NUMBER() OVER (ORDER BY "due", "id") AS "__place" FROM __ranked WHERE "__rank" + "__used" <= 3), __take AS (SELECT "id" FROM __fits WHERE "__place" <= $4 AND "__place" + (SELECT COUNT(*) FROM "jobs" WHERE "queue" = $3 AND "done" IS NULL AND "locked_until" > $2) <= 20 AND "__place" <= (50 * (CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT) + 60000000 - GREATEST(COALESCE((SELECT tat FROM "ops"."app_rates" WHERE tbl = 'jobs' AND grp = $1 AND rate_key = 'w'), CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)), CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)))) / 60000000), __claimed AS (SELECT "id", "tenant", "queue", "due", "attempt", "locked_until", "done", "payload" FROM "jobs" WHERE "id" IN (SELECT "id" FROM __take) ORDER BY "due", "id" FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "jobs" AS __row SET "locked_until" = $5, "attempt" = __row."attempt" + 1 FROM __claimed WHERE __row."id" = __claimed."id") SELECT * FROM __claimed ORDER BY "due", "id"

-- ack (event ack; params: now, id, token)
UPDATE "jobs" SET "done" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- retry (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- retry_after (event retry_after; params: retry_at, id, token)
UPDATE "jobs" SET "due" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- dead_letter: none

-- insert (event insert; params: queue, locked_until, done, payload, tenant)
INSERT INTO "jobs" ("queue", "locked_until", "done", "payload", "tenant") VALUES ($1, $2, $3, $4, $5)

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
INSERT INTO "ops"."app_rates" AS "__r" (tbl, grp, rate_key, tat) SELECT 'jobs', $1, COALESCE('v' || CAST("tenant" AS TEXT), 'n'), CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT) + ($3 * 1000000 + 2) / 3 FROM "jobs" WHERE "id" = $4 ON CONFLICT (tbl, grp, rate_key) DO UPDATE SET tat = GREATEST("__r".tat, CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)) + ($3 * 1000000 + 2) / 3

-- whole_rate_advance (event rate; params: rate_group, now, starts)
INSERT INTO "ops"."app_rates" AS "__r" (tbl, grp, rate_key, tat) SELECT 'jobs', $1, 'w', CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT) + ($3 * 60000000 + 49) / 50 WHERE 1 = 1 ON CONFLICT (tbl, grp, rate_key) DO UPDATE SET tat = GREATEST("__r".tat, CAST(EXTRACT(EPOCH FROM CAST($2 AS TIMESTAMPTZ)) * 1000000 AS BIGINT)) + ($3 * 60000000 + 49) / 50

-- rate_key_index: 1

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"

-- rounds of 3 [0] (event extend; params: lease, ids, tokens)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id"
