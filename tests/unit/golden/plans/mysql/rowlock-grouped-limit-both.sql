-- MySQL, RowLock form, table shape 'grouped', limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, group, group, group, limit)
WITH __due AS (SELECT `__k`, COUNT(*) AS `__n`, MIN(`__place`) AS `__first` FROM (SELECT `tenant` AS `__k`, ROW_NUMBER() OVER (ORDER BY `id`) AS `__place` FROM `jobs` WHERE `queue` = %s) AS __row GROUP BY `__k`), __free AS (SELECT __due.`__k`, `__g`.`__i`, __due.`__first`, __due.`__n` FROM __due CROSS JOIN (SELECT `__i` FROM (SELECT __digits0.`__i` * 1 AS `__i` FROM (SELECT 0 AS `__i` UNION ALL SELECT 1 AS `__i` UNION ALL SELECT 2 AS `__i` UNION ALL SELECT 3 AS `__i` UNION ALL SELECT 4 AS `__i` UNION ALL SELECT 5 AS `__i` UNION ALL SELECT 6 AS `__i` UNION ALL SELECT 7 AS `__i` UNION ALL SELECT 8 AS `__i` UNION ALL SELECT 9 AS `__i`) AS __digits0) AS __digits WHERE `__i` < 3) AS `__g` WHERE IS_FREE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM(__due.`__k`)))), 'NULL'), CAST(`__g`.`__i` AS CHAR))))) = 1), __ranked AS (SELECT `__k`, `__i`, `__first`, `__n`, ROW_NUMBER() OVER (PARTITION BY `__k` ORDER BY `__i`) AS `__r`, COUNT(*) OVER (PARTITION BY `__k`) AS `__c` FROM __free), __fits AS (SELECT `__k`, `__i`, `__first` FROM __ranked WHERE `__r` <= LEAST(`__n`, 3) - (3 - `__c`)) SELECT NULL AS `__k`, COUNT(*) AS `__n`, COALESCE(SUM(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), '*', CAST(__row.`__w` AS CHAR)))), 0)), 0) AS `__m` FROM (SELECT `__g`.`__w`, ROW_NUMBER() OVER (ORDER BY `__g`.`__w`) AS `__r`, COUNT(*) OVER () AS `__c` FROM (SELECT `__w` FROM (SELECT __digits0.`__w` * 1 + __digits1.`__w` * 10 AS `__w` FROM (SELECT 0 AS `__w` UNION ALL SELECT 1 AS `__w` UNION ALL SELECT 2 AS `__w` UNION ALL SELECT 3 AS `__w` UNION ALL SELECT 4 AS `__w` UNION ALL SELECT 5 AS `__w` UNION ALL SELECT 6 AS `__w` UNION ALL SELECT 7 AS `__w` UNION ALL SELECT 8 AS `__w` UNION ALL SELECT 9 AS `__w`) AS __digits0 CROSS JOIN (SELECT 0 AS `__w` UNION ALL SELECT 1 AS `__w` UNION ALL SELECT 2 AS `__w` UNION ALL SELECT 3 AS `__w` UNION ALL SELECT 4 AS `__w` UNION ALL SELECT 5 AS `__w` UNION ALL SELECT 6 AS `__w` UNION ALL SELECT 7 AS `__w` UNION ALL SELECT 8 AS `__w` UNION ALL SELECT 9 AS `__w`) AS __digits1) AS __digits WHERE `__w` < 20) AS `__g` WHERE IS_FREE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), '*', CAST(`__g`.`__w` AS CHAR))))) = 1) AS __row WHERE __row.`__r` <= LEAST(%s, (SELECT COUNT(*) FROM __fits))

-- claim[1] (event claim; params: group, group, group, limit, group)
WITH __due AS (SELECT `__k`, COUNT(*) AS `__n`, MIN(`__place`) AS `__first` FROM (SELECT `tenant` AS `__k`, ROW_NUMBER() OVER (ORDER BY `id`) AS `__place` FROM `jobs` WHERE `queue` = %s) AS __row GROUP BY `__k`), __free AS (SELECT __due.`__k`, `__g`.`__i`, __due.`__first`, __due.`__n` FROM __due CROSS JOIN (SELECT `__i` FROM (SELECT __digits0.`__i` * 1 AS `__i` FROM (SELECT 0 AS `__i` UNION ALL SELECT 1 AS `__i` UNION ALL SELECT 2 AS `__i` UNION ALL SELECT 3 AS `__i` UNION ALL SELECT 4 AS `__i` UNION ALL SELECT 5 AS `__i` UNION ALL SELECT 6 AS `__i` UNION ALL SELECT 7 AS `__i` UNION ALL SELECT 8 AS `__i` UNION ALL SELECT 9 AS `__i`) AS __digits0) AS __digits WHERE `__i` < 3) AS `__g` WHERE IS_FREE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM(__due.`__k`)))), 'NULL'), CAST(`__g`.`__i` AS CHAR))))) = 1), __ranked AS (SELECT `__k`, `__i`, `__first`, `__n`, ROW_NUMBER() OVER (PARTITION BY `__k` ORDER BY `__i`) AS `__r`, COUNT(*) OVER (PARTITION BY `__k`) AS `__c` FROM __free), __fits AS (SELECT `__k`, `__i`, `__first` FROM __ranked WHERE `__r` <= LEAST(`__n`, 3) - (3 - `__c`)), __ordered AS (SELECT `__k`, `__i`, ROW_NUMBER() OVER (ORDER BY `__first`, `__i`) AS `__o` FROM __fits) SELECT `__k`, COUNT(*) AS `__n`, COALESCE(SUM(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM(`__k`)))), 'NULL'), CAST(`__i` AS CHAR)))), 0)), 0) AS `__m` FROM __ordered WHERE `__o` <= LEAST(%s, (SELECT COUNT(*) FROM (SELECT `__w` FROM (SELECT __digits0.`__w` * 1 + __digits1.`__w` * 10 AS `__w` FROM (SELECT 0 AS `__w` UNION ALL SELECT 1 AS `__w` UNION ALL SELECT 2 AS `__w` UNION ALL SELECT 3 AS `__w` UNION ALL SELECT 4 AS `__w` UNION ALL SELECT 5 AS `__w` UNION ALL SELECT 6 AS `__w` UNION ALL SELECT 7 AS `__w` UNION ALL SELECT 8 AS `__w` UNION ALL SELECT 9 AS `__w`) AS __digits0 CROSS JOIN (SELECT 0 AS `__w` UNION ALL SELECT 1 AS `__w` UNION ALL SELECT 2 AS `__w` UNION ALL SELECT 3 AS `__w` UNION ALL SELECT 4 AS `__w` UNION ALL SELECT 5 AS `__w` UNION ALL SELECT 6 AS `__w` UNION ALL SELECT 7 AS `__w` UNION ALL SELECT 8 AS `__w` UNION ALL SELECT 9 AS `__w`) AS __digits1) AS __digits WHERE `__w` < 20) AS `__g` WHERE IS_USED_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), '*', CAST(`__g`.`__w` AS CHAR))))) = CONNECTION_ID())) GROUP BY `__k` ORDER BY MIN(`__o`)

-- ack (event ack; params: id)
DELETE FROM `jobs` WHERE `id` = %s

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: queue, payload, tenant)
INSERT INTO `jobs` (`queue`, `payload`, `tenant`) VALUES (%s, %s, %s)

-- snooze: none

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- slot_rows (event claim; params: group, key)
SELECT `id` FROM `jobs` WHERE `queue` = %s AND `tenant` <=> %s ORDER BY `id` LIMIT 3

-- slot_lock (event claim; params: id, group)
SELECT `id`, `tenant`, `queue`, `payload` FROM `jobs` WHERE `id` = %s AND `queue` = %s FOR UPDATE SKIP LOCKED

-- slot_release (event release; params: none)
SELECT RELEASE_ALL_LOCKS()

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
