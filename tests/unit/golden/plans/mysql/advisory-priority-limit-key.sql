-- MySQL, Advisory form, table shape 'priority', limit-key
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event candidates; params: group, group, now, limit)
WITH RECURSIVE __n (`__i`) AS (SELECT 0 UNION ALL SELECT `__i` + 1 FROM __n WHERE `__i` < 2), __window AS (SELECT `id`, IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), ''))) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), 256)) AS `__lock`, COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM(`tenant`)))), 'NULL') AS `__slot_key`, (SELECT 3 - COUNT(*) FROM __n WHERE __n.`__i` < 3 AND IS_USED_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM(`tenant`)))), 'NULL'), CAST(__n.`__i` AS CHAR))))) IS NOT NULL) AS `__free`, CAST(NULL AS SIGNED) AS `__whole_free`, ROW_NUMBER() OVER (ORDER BY `priority`, `due`, `id`) AS `__place` FROM `jobs` WHERE `queue` = %s AND `due` <= %s AND `done` IS NULL AND IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), ''))) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), 256))) IS NULL HAVING `__free` > 0 ORDER BY `priority`, `due`, `id` LIMIT 256) SELECT `id`, `__lock`, `__slot_key`, `__free`, `__whole_free` FROM (SELECT __window.*, ROW_NUMBER() OVER (PARTITION BY `__slot_key` ORDER BY `__place`) AS `__rank` FROM __window) AS __ranked WHERE `__free` IS NULL OR `__rank` <= `__free` ORDER BY `__place` LIMIT %s

-- ack (event ack; params: now, id)
UPDATE `jobs` SET `done` = %s WHERE `id` = %s

-- retry: none

-- retry_after (event retry_after; params: retry_at, id)
UPDATE `jobs` SET `due` = %s WHERE `id` = %s

-- dead_letter: none

-- insert (event insert; params: queue, priority, done, payload, tenant)
INSERT INTO `jobs` (`queue`, `priority`, `done`, `payload`, `tenant`) VALUES (%s, %s, %s, %s, %s)

-- snooze (event snooze; params: retry_at, id)
UPDATE `jobs` SET `due` = %s, `attempt` = `attempt` - 1 WHERE `id` = %s

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group, now)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s AND `queue` = %s AND `due` <= %s AND `done` IS NULL

-- take[1] (event take; params: id)
SELECT `id`, `tenant`, `queue`, `priority`, `due`, `attempt` - 1 AS `attempt`, `done`, `payload` FROM `jobs` WHERE `id` = %s

-- lock (event lock; params: key)
SELECT CAST(COALESCE(GET_LOCK(%s, 0), 0) AS SIGNED)

-- unlock (event unlock; params: key, group, slot_key, slot)
SELECT CAST((COALESCE(RELEASE_LOCK(%s), 0) + COALESCE(RELEASE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), %s, CAST(%s AS CHAR))))), 0)) = 2 AS SIGNED)

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots (event key_slots; params: group, slot_key, group, slot_key, key, group, slot_key)
WITH RECURSIVE __s (`__i`, `__got`) AS (SELECT 0, COALESCE(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), %s, CAST(0 AS CHAR)))), 0), 0) UNION ALL SELECT `__i` + 1, COALESCE(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), %s, CAST(`__i` + 1 AS CHAR)))), 0), 0) FROM __s WHERE `__got` = 0 AND `__i` < 2) SELECT CAST(NOT (__r.__s IS NULL) AS SIGNED), __r.__s, __r.__w, CASE WHEN __r.__s IS NULL THEN COALESCE(RELEASE_LOCK(%s), 0) + IF(__r.__s IS NULL, 0, COALESCE(RELEASE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), %s, CAST(__r.__s AS CHAR))))), 0)) END FROM (SELECT (SELECT `__i` FROM __s WHERE `__got` = 1) AS __s, CAST(NULL AS SIGNED) AS __w LIMIT 1) AS __r

-- rounds of 1: none

-- rounds of 3: none
