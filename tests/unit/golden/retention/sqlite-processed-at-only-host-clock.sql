-- SQLite retention, table shape 'processed-at-only'
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py

-- processed delete on `jobs` (event prune processed; params: before, before)
DELETE FROM `jobs` WHERE `id` IN (SELECT `id` FROM `jobs` WHERE `done` < ? ORDER BY `id` LIMIT 1000) AND `done` < ?

-- processed count on `jobs` (event prune processed; params: before)
SELECT count(*) FROM `jobs` WHERE `done` < ?

-- now
SELECT (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')
