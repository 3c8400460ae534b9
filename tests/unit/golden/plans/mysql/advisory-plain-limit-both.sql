-- MySQL, Advisory form, table shape 'plain', limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event candidates; params: limit)
WITH RECURSIVE __n (`__i`) AS (SELECT 0 UNION ALL SELECT `__i` + 1 FROM __n WHERE `__i` < 19), __window AS (SELECT `id`, IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), ''))) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), 256)) AS `__lock`, COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM(`tenant`)))), 'NULL') AS `__slot_key`, (SELECT 3 - COUNT(*) FROM __n WHERE __n.`__i` < 3 AND IS_USED_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM(`tenant`)))), 'NULL'), CAST(__n.`__i` AS CHAR))))) IS NOT NULL) AS `__free`, (SELECT 20 - COUNT(*) FROM __n WHERE __n.`__i` < 20 AND IS_USED_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', '*', CAST(__n.`__i` AS CHAR))))) IS NOT NULL) AS `__whole_free`, ROW_NUMBER() OVER (ORDER BY `id`) AS `__place` FROM `jobs` WHERE IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), ''))) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), 256))) IS NULL HAVING `__free` > 0 AND `__whole_free` > 0 ORDER BY `id` LIMIT 256) SELECT `id`, `__lock`, `__slot_key`, `__free`, `__whole_free` FROM (SELECT __window.*, ROW_NUMBER() OVER (PARTITION BY `__slot_key` ORDER BY `__place`) AS `__rank` FROM __window) AS __ranked WHERE `__free` IS NULL OR `__rank` <= `__free` ORDER BY `__place` LIMIT %s

-- ack (event ack; params: id)
DELETE FROM `jobs` WHERE `id` = %s

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: payload, tenant)
INSERT INTO `jobs` (`payload`, `tenant`) VALUES (%s, %s)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id)
SELECT `id`, `tenant`, `payload` FROM `jobs` WHERE `id` = %s

-- lock (event lock; params: key)
SELECT CAST(COALESCE(GET_LOCK(%s, 0), 0) AS SIGNED)

-- unlock (event unlock; params: key, slot_key, slot, whole)
SELECT CAST((COALESCE(RELEASE_LOCK(%s), 0) + COALESCE(RELEASE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', %s, CAST(%s AS CHAR))))), 0) + COALESCE(RELEASE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', '*', CAST(%s AS CHAR))))), 0)) = 3 AS SIGNED)

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots (event key_slots; params: slot_key, slot_key, key, slot_key)
WITH RECURSIVE __s (`__i`, `__got`) AS (SELECT 0, COALESCE(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', %s, CAST(0 AS CHAR)))), 0), 0) UNION ALL SELECT `__i` + 1, COALESCE(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', %s, CAST(`__i` + 1 AS CHAR)))), 0), 0) FROM __s WHERE `__got` = 0 AND `__i` < 2), __w (`__i`, `__got`) AS (SELECT 0, COALESCE(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', '*', CAST(0 AS CHAR)))), 0), 0) UNION ALL SELECT `__i` + 1, COALESCE(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', '*', CAST(`__i` + 1 AS CHAR)))), 0), 0) FROM __w WHERE `__got` = 0 AND `__i` < 19) SELECT CAST(NOT (__r.__s IS NULL OR __r.__w IS NULL) AS SIGNED), __r.__s, __r.__w, CASE WHEN __r.__s IS NULL OR __r.__w IS NULL THEN COALESCE(RELEASE_LOCK(%s), 0) + IF(__r.__s IS NULL, 0, COALESCE(RELEASE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', %s, CAST(__r.__s AS CHAR))))), 0)) + IF(__r.__w IS NULL, 0, COALESCE(RELEASE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', '*', CAST(__r.__w AS CHAR))))), 0)) END FROM (SELECT (SELECT `__i` FROM __s WHERE `__got` = 1) AS __s, (SELECT `__i` FROM __w WHERE `__got` = 1) AS __w LIMIT 1) AS __r

-- rounds of 1: none

-- rounds of 3: none
