-- MySQL retention, table shape 'dead-letter-group-dated'
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py

-- before each delete
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- processed delete on `jobs` (event prune processed; params: before)
DELETE FROM `jobs` WHERE `done` < %s ORDER BY `id` LIMIT 1000

-- processed count on `jobs` (event prune processed; params: before)
SELECT count(*) FROM `jobs` WHERE `done` < %s

-- dead_letters delete on `jobs` (event prune dead letters; params: dest, before)
DELETE FROM `jobs` WHERE `queue` = %s AND `died` < %s ORDER BY `id` LIMIT 1000

-- dead_letters count on `jobs` (event prune dead letters; params: dest, before)
SELECT count(*) FROM `jobs` WHERE `queue` = %s AND `died` < %s

-- now
SELECT UTC_TIMESTAMP(6)
