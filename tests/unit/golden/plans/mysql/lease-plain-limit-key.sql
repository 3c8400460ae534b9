-- MySQL, Lease form, table shape 'plain', limit-key
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: now, now, limit)
WITH __live AS (SELECT `tenant` AS `__key`, COUNT(*) AS `__count` FROM `jobs` WHERE `locked_until` > %s GROUP BY `tenant`), __window AS (SELECT __row.`id`, __row.`tenant` FROM `jobs` AS __row WHERE (__row.`locked_until` IS NULL OR __row.`locked_until` <= %s) AND (__row.`tenant` IS NULL OR __row.`tenant` NOT IN (SELECT __live.`__key` FROM __live WHERE __live.`__key` IS NOT NULL AND __live.`__count` >= 3)) AND (__row.`tenant` IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live.`__key` IS NULL AND __live.`__count` >= 3)) ORDER BY __row.`id` LIMIT 256), __ranked AS (SELECT __row.`id`, ROW_NUMBER() OVER (PARTITION BY __row.`tenant` ORDER BY __row.`id`) AS `__rank`, COALESCE(__live.`__count`, CASE WHEN __row.`tenant` IS NULL THEN (SELECT `__count` FROM __live WHERE `__key` IS NULL) END, 0) AS `__used` FROM __window AS __row LEFT JOIN __live ON __live.`__key` = __row.`tenant`), __fits AS (SELECT `id`, ROW_NUMBER() OVER (ORDER BY `id`) AS `__place` FROM __ranked WHERE `__rank` + `__used` <= 3), __take AS (SELECT `id` FROM __fits WHERE `__place` <= %s) SELECT `id`, `tenant`, `locked_until`, `payload` FROM `jobs` WHERE `id` IN (SELECT `id` FROM __take) ORDER BY `id`

-- claim[1] (event stamp; params: lease, id, now)
UPDATE `jobs` SET `locked_until` = %s WHERE `id` = %s AND (`locked_until` IS NULL OR `locked_until` <= %s)

-- ack (event ack; params: id, token)
DELETE FROM `jobs` WHERE `id` = %s AND `locked_until` = %s

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: locked_until, payload, tenant)
INSERT INTO `jobs` (`locked_until`, `payload`, `tenant`) VALUES (%s, %s, %s)

-- snooze: none

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch: none

-- release (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- extend[0] (event extend; params: id0, token0)
SELECT `id` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

-- extend[1] (event extend; params: lease, id0, token0)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s))

-- fetch: none

-- stamp: none

-- lease_token: none

-- limit_lock (event lock; params: none)
SELECT CAST(COALESCE(GET_LOCK(IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'trinbox_limit:jobs')) <= 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'trinbox_limit:jobs'), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'trinbox_limit:jobs'), 256)), 10), 0) AS SIGNED)

-- limit_unlock (event unlock; params: none)
SELECT CAST(COALESCE(RELEASE_LOCK(IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'trinbox_limit:jobs')) <= 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'trinbox_limit:jobs'), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'trinbox_limit:jobs'), 256))), 0) AS SIGNED)

-- key_slots: none

-- rounds of 1 [0] (event extend; params: id0, token0)
SELECT `id` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

-- rounds of 1 [1] (event extend; params: lease, id0, token0)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s))

-- rounds of 3 [0] (event extend; params: id0, token0, id1, token1, id2, token2)
SELECT `id` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s)) FOR UPDATE

-- rounds of 3 [1] (event extend; params: lease, id0, token0, id1, token1, id2, token2)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s))
