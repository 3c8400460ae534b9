-- MySQL, Lease form, table shape 'fifo-priority', database-clock-limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, group, group, limit, lease_seconds)
WITH __live AS (SELECT `tenant` AS `__key`, COUNT(*) AS `__count` FROM `jobs` WHERE `done` IS NULL AND `locked_until` > UTC_TIMESTAMP(6) GROUP BY `tenant`), __window AS (SELECT __row.`priority`, __row.`due`, __row.`id`, __row.`tenant` FROM `jobs` AS __row WHERE `id` = (SELECT `id` FROM `jobs` WHERE `queue` = %s AND `done` IS NULL ORDER BY `priority`, `id` LIMIT 1) AND `queue` = %s AND `done` IS NULL AND `due` <= UTC_TIMESTAMP(6) AND (`locked_until` IS NULL OR `locked_until` <= UTC_TIMESTAMP(6)) AND NOT EXISTS (SELECT 1 FROM `jobs` AS __work WHERE __work.`queue` = %s AND __work.`locked_until` > UTC_TIMESTAMP(6)) AND (__row.`tenant` IS NULL OR __row.`tenant` NOT IN (SELECT __live.`__key` FROM __live WHERE __live.`__key` IS NOT NULL AND __live.`__count` >= 3)) AND (__row.`tenant` IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live.`__key` IS NULL AND __live.`__count` >= 3)) ORDER BY __row.`priority`, __row.`id` LIMIT 256), __ranked AS (SELECT __row.`priority`, __row.`due`, __row.`id`, ROW_NUMBER() OVER (PARTITION BY __row.`tenant` ORDER BY __row.`priority`, __row.`id`) AS `__rank`, COALESCE(__live.`__count`, CASE WHEN __row.`tenant` IS NULL THEN (SELECT `__count` FROM __live WHERE `__key` IS NULL) END, 0) AS `__used` FROM __window AS __row LEFT JOIN __live ON __live.`__key` = __row.`tenant`), __fits AS (SELECT `priority`, `due`, `id`, ROW_NUMBER() OVER (ORDER BY `priority`, `id`) AS `__place` FROM __ranked WHERE `__rank` + `__used` <= 3), __take AS (SELECT `id` FROM __fits WHERE `__place` <= %s AND `__place` + (SELECT COUNT(*) FROM `jobs` WHERE `done` IS NULL AND `locked_until` > UTC_TIMESTAMP(6)) <= 20) SELECT `id`, `tenant`, `queue`, `priority`, `due`, `attempt`, `locked_until`, `done`, `payload`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE `id` IN (SELECT `id` FROM __take) ORDER BY `priority`, `due`, `id`

-- claim[1] (event stamp; params: lease, id)
UPDATE `jobs` SET `locked_until` = %s, `attempt` = `attempt` + 1 WHERE `id` = %s AND (`locked_until` IS NULL OR `locked_until` <= UTC_TIMESTAMP(6))

-- ack (event ack; params: id, token)
UPDATE `jobs` SET `done` = UTC_TIMESTAMP(6), `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry_after (event retry_after; params: delay, id, token)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- dead_letter: none

-- insert (event insert; params: queue, priority, locked_until, done, payload, tenant)
INSERT INTO `jobs` (`queue`, `priority`, `locked_until`, `done`, `payload`, `tenant`) VALUES (%s, %s, %s, %s, %s, %s)

-- snooze (event snooze; params: delay, id, token)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- guard (event guard; params: group, group)
SELECT CAST((SELECT COUNT(*) FROM `jobs` WHERE `queue` = %s AND `done` IS NULL) = (SELECT COUNT(*) FROM (SELECT `id` FROM `jobs` WHERE `queue` = %s AND `done` IS NULL FOR UPDATE SKIP LOCKED) AS __guard) AS SIGNED)

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
