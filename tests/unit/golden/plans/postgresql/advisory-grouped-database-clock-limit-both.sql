-- PostgreSQL, Advisory form, table shape 'grouped', database-clock-limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: group, limit)
WITH __held AS MATERIALIZED (SELECT (l.classid::bigint << 32) | l.objid::bigint AS "__h" FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())), __window AS MATERIALIZED (SELECT __candidates."id", __candidates."__lock", __candidates."__slot_key", __f."__free", __w."__whole_free", __candidates."__place" FROM (SELECT "id", concat('jobs-', COALESCE("id"::text, '')) AS "__lock", quote_nullable(CAST("tenant" AS text)) AS "__slot_key", ROW_NUMBER() OVER (ORDER BY "id") AS "__place" FROM "jobs" WHERE "queue" = $1 ORDER BY "id" OFFSET 0) AS __candidates CROSS JOIN LATERAL (SELECT (SELECT 3 - COUNT(*) FROM generate_series(0, 2) AS "__g"("__i") WHERE hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', __candidates."__slot_key", ':', "__g"."__i"), 0) IN (SELECT "__h" FROM __held)) AS "__free") AS __f CROSS JOIN (SELECT (SELECT 20 - COUNT(*) FROM generate_series(0, 19) AS "__g"("__i") WHERE hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', '*', ':', "__g"."__i"), 0) IN (SELECT "__h" FROM __held)) AS "__whole_free") AS __w WHERE __w."__whole_free" > 0 AND __f."__free" > 0 AND pg_try_advisory_xact_lock_shared(hashtextextended(__candidates."__lock", 0)) LIMIT 256) SELECT "id", "__lock", "__slot_key", "__free", "__whole_free" FROM (SELECT __window.*, ROW_NUMBER() OVER (PARTITION BY "__slot_key" ORDER BY "__place") AS "__rank" FROM __window) AS __ranked WHERE "__free" IS NULL OR "__rank" <= "__free" ORDER BY "__place" LIMIT $2

-- ack (event ack; params: id)
DELETE FROM "jobs" WHERE "id" = $1

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: queue, payload, tenant)
INSERT INTO "jobs" ("queue", "payload", "tenant") VALUES ($1, $2, $3)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group)
SELECT "id", "tenant", "queue", "payload" FROM "jobs" WHERE "id" = $1 AND "queue" = $2

-- lock (event lock; params: key)
SELECT pg_try_advisory_lock(hashtextextended($1, 0))::int::bigint

-- unlock (event unlock; params: key, group, slot_key, slot, whole)
SELECT CAST((pg_advisory_unlock(hashtextextended($1, 0))::int + pg_advisory_unlock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($2 AS text)), ':', CAST($3 AS text), ':', CAST($4 AS integer)), 0))::int + pg_advisory_unlock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($2 AS text)), ':', '*', ':', CAST($5 AS integer)), 0))::int) = 3 AS int)::bigint

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots (event key_slots; params: group, slot_key, key)
WITH __s AS MATERIALIZED (SELECT (SELECT "__g"."__i" FROM generate_series(0, 2) AS "__g"("__i") WHERE pg_try_advisory_lock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', CAST($2 AS text), ':', "__g"."__i"), 0)) LIMIT 1) AS "__i"), __w AS MATERIALIZED (SELECT (SELECT "__g"."__i" FROM generate_series(0, 19) AS "__g"("__i") WHERE CASE WHEN (SELECT "__i" FROM __s) IS NOT NULL THEN pg_try_advisory_lock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', '*', ':', "__g"."__i"), 0)) ELSE false END LIMIT 1) AS "__i") SELECT CAST((__s."__i" IS NOT NULL AND __w."__i" IS NOT NULL)::int AS bigint), __s."__i", __w."__i", CASE WHEN NOT (__s."__i" IS NOT NULL AND __w."__i" IS NOT NULL) THEN pg_advisory_unlock(hashtextextended($3, 0)) END, CASE WHEN __s."__i" IS NOT NULL AND __w."__i" IS NULL THEN pg_advisory_unlock(hashtextextended(concat('trinbox_slot:jobs:', quote_nullable(CAST($1 AS text)), ':', CAST($2 AS text), ':', __s."__i"), 0)) END FROM __s, __w

-- rounds of 1: none

-- rounds of 3: none
