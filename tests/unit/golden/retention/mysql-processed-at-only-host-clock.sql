-- MySQL retention, table shape 'processed-at-only'
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py

-- before each delete
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- processed delete on `jobs` (event prune processed; params: before)
DELETE FROM `jobs` WHERE `done` < %s ORDER BY `id` LIMIT 1000

-- processed count on `jobs` (event prune processed; params: before)
SELECT count(*) FROM `jobs` WHERE `done` < %s

-- now
SELECT UTC_TIMESTAMP(6)
