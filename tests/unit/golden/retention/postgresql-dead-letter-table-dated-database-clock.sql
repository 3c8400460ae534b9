-- PostgreSQL retention, table shape 'dead-letter-table-dated'
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py

-- processed delete on "jobs" (event prune processed; params: before)
DELETE FROM "jobs" WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "done" < $1 ORDER BY "id" LIMIT 1000 FOR UPDATE SKIP LOCKED) AND "done" < $1

-- processed count on "jobs" (event prune processed; params: before)
SELECT count(*) FROM "jobs" WHERE "done" < $1

-- dead_letters delete on "jobs_dead" (event prune dead letters; params: before)
DELETE FROM "jobs_dead" WHERE "id" IN (SELECT "id" FROM "jobs_dead" WHERE "died" < $1 ORDER BY "id" LIMIT 1000 FOR UPDATE SKIP LOCKED) AND "died" < $1

-- dead_letters count on "jobs_dead" (event prune dead letters; params: before)
SELECT count(*) FROM "jobs_dead" WHERE "died" < $1

-- now
SELECT statement_timestamp()
