-- MySQL, Lease form, table shape 'grouped', database-clock-limit-whole
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, limit, group, lease_seconds)
WITH __window AS (SELECT __row.`id` FROM `jobs` AS __row WHERE __row.`queue` = %s AND (__row.`locked_until` IS NULL OR __row.`locked_until` <= UTC_TIMESTAMP(6)) ORDER BY __row.`id` LIMIT 256), __fits AS (SELECT `id`, ROW_NUMBER() OVER (ORDER BY `id`) AS `__place` FROM __window), __take AS (SELECT `id` FROM __fits WHERE `__place` <= %s AND `__place` + (SELECT COUNT(*) FROM `jobs` WHERE `queue` = %s AND `locked_until` > UTC_TIMESTAMP(6)) <= 20) SELECT `id`, `tenant`, `queue`, `locked_until`, `payload`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE `id` IN (SELECT `id` FROM __take) ORDER BY `id`

-- claim[1] (event stamp; params: lease, id)
UPDATE `jobs` SET `locked_until` = %s WHERE `id` = %s AND (`locked_until` IS NULL OR `locked_until` <= UTC_TIMESTAMP(6))

-- ack (event ack; params: id, token)
DELETE FROM `jobs` WHERE `id` = %s AND `locked_until` = %s

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: queue, locked_until, payload, tenant)
INSERT INTO `jobs` (`queue`, `locked_until`, `payload`, `tenant`) VALUES (%s, %s, %s, %s)

-- snooze: none

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch: none

-- release (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- extend[0] (event extend; params: lease_seconds, id0, token0)
SELECT `id`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

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

-- rounds of 1 [0] (event extend; params: lease_seconds, id0, token0)
SELECT `id`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

-- rounds of 1 [1] (event extend; params: lease, id0, token0)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s))

-- rounds of 3 [0] (event extend; params: lease_seconds, id0, token0, id1, token1, id2, token2)
SELECT `id`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s)) FOR UPDATE

-- rounds of 3 [1] (event extend; params: lease, id0, token0, id1, token1, id2, token2)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s))
