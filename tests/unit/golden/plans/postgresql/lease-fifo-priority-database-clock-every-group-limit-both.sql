-- PostgreSQL, Lease form, table shape 'fifo-priority', database-clock-every-group-limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, limit, lease_seconds)
WITH __live AS (SELECT "tenant" AS "__key", COUNT(*) AS "__count" FROM "jobs" WHERE "done" IS NULL AND "locked_until" > statement_timestamp() GROUP BY "tenant"), __window AS (SELECT __row."priority", __row."due", __row."id", __row."tenant" FROM "jobs" AS __row WHERE "id" = (SELECT "id" FROM "jobs" WHERE "queue" = $1 AND "done" IS NULL ORDER BY "priority", "id" LIMIT 1) AND "queue" = $1 AND "done" IS NULL AND "due" <= statement_timestamp() AND ("locked_until" IS NULL OR "locked_until" <= statement_timestamp()) AND NOT EXISTS (SELECT 1 FROM "jobs" AS __work WHERE __work."queue" = $1 AND __work."locked_until" > statement_timestamp()) AND (__row."tenant" IS NULL OR __row."tenant" NOT IN (SELECT __live."__key" FROM __live WHERE __live."__key" IS NOT NULL AND __live."__count" >= 3)) AND (__row."tenant" IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live."__key" IS NULL AND __live."__count" >= 3)) ORDER BY __row."priority", __row."id" LIMIT 256), __ranked AS (SELECT __row."priority", __row."due", __row."id", ROW_NUMBER() OVER (PARTITION BY __row."tenant" ORDER BY __row."priority", __row."id") AS "__rank", COALESCE(__live."__count", CASE WHEN __row."tenant" IS NULL THEN (SELECT "__count" FROM __live WHERE "__key" IS NULL) END, 0) AS "__used" FROM __window AS __row LEFT JOIN __live ON __live."__key" = __row."tenant"), __fits AS (SELECT "priority", "due", "id", ROW_NUMBER() OVER (ORDER BY "priority", "id") AS "__place" FROM __ranked WHERE "__rank" + "__used" <= 3), __take AS (SELECT "id" FROM __fits WHERE "__place" <= $2 AND "__place" + (SELECT COUNT(*) FROM "jobs" WHERE "done" IS NULL AND "locked_until" > statement_timestamp()) <= 20), __claimed AS (SELECT "id", "tenant", "queue", "priority", "due", "attempt", "locked_until", "done", "payload" FROM "jobs" WHERE "id" IN (SELECT "id" FROM __take) ORDER BY "priority", "due", "id" FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "jobs" AS __row SET "locked_until" = to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $3::integer)), "attempt" = __row."attempt" + 1 FROM __claimed WHERE __row."id" = __claimed."id") SELECT *, to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $3::integer)) AS "__token" FROM __claimed ORDER BY "priority", "due", "id"

-- ack (event ack; params: id, token)
UPDATE "jobs" SET "done" = statement_timestamp(), "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- retry (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- retry_after (event retry_after; params: delay, id, token)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- dead_letter: none

-- insert (event insert; params: queue, priority, locked_until, done, payload, tenant)
INSERT INTO "jobs" ("queue", "priority", "locked_until", "done", "payload", "tenant") VALUES ($1, $2, $3, $4, $5, $6)

-- snooze (event snooze; params: delay, id, token)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "attempt" = "attempt" - 1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- guard (event guard; params: group)
SELECT pg_try_advisory_xact_lock(hashtextextended('jobs:' || CAST($1 AS text), 0))::int::bigint

-- heads (event heads; params: limit)
WITH __live AS (SELECT "tenant" AS "__key", COUNT(*) AS "__count" FROM "jobs" WHERE "done" IS NULL AND "locked_until" > statement_timestamp() GROUP BY "tenant"), __window AS (SELECT __head."priority", __head."due", __head."id", __head."tenant" FROM (SELECT DISTINCT "queue" AS __group FROM "jobs" WHERE "done" IS NULL) AS __groups JOIN "jobs" AS __head ON __head."id" = (SELECT __first."id" FROM "jobs" AS __first WHERE __first."queue" = __groups.__group AND __first."done" IS NULL ORDER BY __first."priority", __first."id" LIMIT 1) WHERE __head."due" <= statement_timestamp() AND NOT EXISTS (SELECT 1 FROM "jobs" AS __work WHERE __work."queue" = __groups.__group AND __work."locked_until" > statement_timestamp()) AND (__head."tenant" IS NULL OR __head."tenant" NOT IN (SELECT __live."__key" FROM __live WHERE __live."__key" IS NOT NULL AND __live."__count" >= 3)) AND (__head."tenant" IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live."__key" IS NULL AND __live."__count" >= 3)) ORDER BY __head."priority", __head."id" LIMIT 256), __ranked AS (SELECT __head."priority", __head."due", __head."id", ROW_NUMBER() OVER (PARTITION BY __head."tenant" ORDER BY __head."priority", __head."id") AS "__rank", COALESCE(__live."__count", CASE WHEN __head."tenant" IS NULL THEN (SELECT "__count" FROM __live WHERE "__key" IS NULL) END, 0) AS "__used" FROM __window AS __head LEFT JOIN __live ON __live."__key" = __head."tenant"), __fits AS (SELECT "priority", "due", "id", ROW_NUMBER() OVER (ORDER BY "priority", "id") AS "__place" FROM __ranked WHERE "__rank" + "__used" <= 3), __take AS (SELECT "id" FROM __fits WHERE "__place" <= $1 AND "__place" + (SELECT COUNT(*) FROM "jobs" WHERE "done" IS NULL AND "locked_until" > statement_timestamp()) <= 20) SELECT "queue" FROM "jobs" WHERE "id" IN (SELECT "id" FROM __take) ORDER BY "priority", "id"

-- take: none

-- lock: none

-- unlock: none

-- batch[0] (event ack; params: ids, token)
UPDATE "jobs" SET "done" = statement_timestamp(), "locked_until" = NULL WHERE "id" = ANY($1) AND "locked_until" = $2 RETURNING "id"

-- batch[1] (event retry; params: ids, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = ANY($1) AND "locked_until" = $2 RETURNING "id"

-- batch[2] (event retry_after; params: delay, ids, token)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "locked_until" = NULL WHERE "id" = ANY($2) AND "locked_until" = $3 RETURNING "id"

-- batch[3] (event snooze; params: delay, ids, token)
UPDATE "jobs" SET "due" = (statement_timestamp() + $1::bigint * interval '1 microsecond'), "attempt" = "attempt" - 1, "locked_until" = NULL WHERE "id" = ANY($2) AND "locked_until" = $3 RETURNING "id"

-- release (event retry; params: id, token)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- extend[0] (event extend; params: lease_seconds, ids, tokens)
UPDATE "jobs" SET "locked_until" = to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $1::integer)) WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id", "locked_until" AS "__token"

-- fetch: none

-- stamp: none

-- lease_token: none

-- limit_lock (event lock; params: none)
SELECT pg_advisory_xact_lock(hashtextextended('trinbox_limit:jobs', 0))

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease_seconds, ids, tokens)
UPDATE "jobs" SET "locked_until" = to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $1::integer)) WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id", "locked_until" AS "__token"

-- rounds of 3 [0] (event extend; params: lease_seconds, ids, tokens)
UPDATE "jobs" SET "locked_until" = to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $1::integer)) WHERE "id" = ANY($2) AND "locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "id", "locked_until" AS "__token"
