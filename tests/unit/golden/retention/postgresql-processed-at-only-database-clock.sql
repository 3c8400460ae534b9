-- PostgreSQL retention, table shape 'processed-at-only'
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py

-- processed delete on "jobs" (event prune processed; params: before)
DELETE FROM "jobs" WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "done" < $1 ORDER BY "id" LIMIT 1000 FOR UPDATE SKIP LOCKED) AND "done" < $1

-- processed count on "jobs" (event prune processed; params: before)
SELECT count(*) FROM "jobs" WHERE "done" < $1

-- now
SELECT statement_timestamp()
