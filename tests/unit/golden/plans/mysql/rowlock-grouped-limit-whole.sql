-- MySQL, RowLock form, table shape 'grouped', limit-whole
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, group, limit, group)
SELECT NULL AS `__k`, COUNT(*) AS `__n`, COALESCE(SUM(GET_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), '*', CAST(__row.`__w` AS CHAR)))), 0)), 0) AS `__m` FROM (SELECT `__g`.`__w`, ROW_NUMBER() OVER (ORDER BY `__g`.`__w`) AS `__r`, COUNT(*) OVER () AS `__c` FROM (SELECT `__w` FROM (SELECT __digits0.`__w` * 1 + __digits1.`__w` * 10 AS `__w` FROM (SELECT 0 AS `__w` UNION ALL SELECT 1 AS `__w` UNION ALL SELECT 2 AS `__w` UNION ALL SELECT 3 AS `__w` UNION ALL SELECT 4 AS `__w` UNION ALL SELECT 5 AS `__w` UNION ALL SELECT 6 AS `__w` UNION ALL SELECT 7 AS `__w` UNION ALL SELECT 8 AS `__w` UNION ALL SELECT 9 AS `__w`) AS __digits0 CROSS JOIN (SELECT 0 AS `__w` UNION ALL SELECT 1 AS `__w` UNION ALL SELECT 2 AS `__w` UNION ALL SELECT 3 AS `__w` UNION ALL SELECT 4 AS `__w` UNION ALL SELECT 5 AS `__w` UNION ALL SELECT 6 AS `__w` UNION ALL SELECT 7 AS `__w` UNION ALL SELECT 8 AS `__w` UNION ALL SELECT 9 AS `__w`) AS __digits1) AS __digits WHERE `__w` < 20) AS `__g` WHERE IS_FREE_LOCK(CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), 'jobs', QUOTE(CAST(%s AS CHAR)), '*', CAST(`__g`.`__w` AS CHAR))))) = 1) AS __row WHERE __row.`__r` <= LEAST(%s, (SELECT COUNT(*) FROM `jobs` WHERE `queue` = %s) - (20 - __row.`__c`))

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

-- slot_rows (event claim; params: group)
SELECT `id` FROM `jobs` WHERE `queue` = %s ORDER BY `id` LIMIT 20

-- slot_lock (event claim; params: id, group)
SELECT `id`, `tenant`, `queue`, `payload` FROM `jobs` WHERE `id` = %s AND `queue` = %s FOR UPDATE SKIP LOCKED

-- slot_release (event release; params: none)
SELECT RELEASE_ALL_LOCKS()

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
