-- SQLite retention, table shape 'dead-letter-table-dated'
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py

-- processed delete on `jobs` (event prune processed; params: before, before)
DELETE FROM `jobs` WHERE `id` IN (SELECT `id` FROM `jobs` WHERE `done` < ? ORDER BY `id` LIMIT 1000) AND `done` < ?

-- processed count on `jobs` (event prune processed; params: before)
SELECT count(*) FROM `jobs` WHERE `done` < ?

-- dead_letters delete on `jobs_dead` (event prune dead letters; params: before, before)
DELETE FROM `jobs_dead` WHERE `id` IN (SELECT `id` FROM `jobs_dead` WHERE `died` < ? ORDER BY `id` LIMIT 1000) AND `died` < ?

-- dead_letters count on `jobs_dead` (event prune dead letters; params: before)
SELECT count(*) FROM `jobs_dead` WHERE `died` < ?

-- now
SELECT (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')
