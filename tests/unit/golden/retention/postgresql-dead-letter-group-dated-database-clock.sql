-- PostgreSQL retention, table shape 'dead-letter-group-dated'
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py

-- processed delete on "jobs" (event prune processed; params: before)
DELETE FROM "jobs" WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "done" < $1 ORDER BY "id" LIMIT 1000 FOR UPDATE SKIP LOCKED) AND "done" < $1

-- processed count on "jobs" (event prune processed; params: before)
SELECT count(*) FROM "jobs" WHERE "done" < $1

-- dead_letters delete on "jobs" (event prune dead letters; params: dest, before)
DELETE FROM "jobs" WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "queue" = $1 AND "died" < $2 ORDER BY "id" LIMIT 1000 FOR UPDATE SKIP LOCKED) AND "queue" = $1 AND "died" < $2

-- dead_letters count on "jobs" (event prune dead letters; params: dest, before)
SELECT count(*) FROM "jobs" WHERE "queue" = $1 AND "died" < $2

-- now
SELECT statement_timestamp()
