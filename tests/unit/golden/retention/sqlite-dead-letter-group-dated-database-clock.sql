-- SQLite retention, table shape 'dead-letter-group-dated'
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py

-- processed delete on `jobs` (event prune processed; params: before, before)
DELETE FROM `jobs` WHERE `id` IN (SELECT `id` FROM `jobs` WHERE `done` < ? ORDER BY `id` LIMIT 1000) AND `done` < ?

-- processed count on `jobs` (event prune processed; params: before)
SELECT count(*) FROM `jobs` WHERE `done` < ?

-- dead_letters delete on `jobs` (event prune dead letters; params: dest, before, dest, before)
DELETE FROM `jobs` WHERE `id` IN (SELECT `id` FROM `jobs` WHERE `queue` = ? AND `died` < ? ORDER BY `id` LIMIT 1000) AND `queue` = ? AND `died` < ?

-- dead_letters count on `jobs` (event prune dead letters; params: dest, before)
SELECT count(*) FROM `jobs` WHERE `queue` = ? AND `died` < ?

-- now
SELECT (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')
