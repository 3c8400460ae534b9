-- MySQL, Lease form, table shape 'fifo-behind', database-clock-every-group
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: lease_seconds, group, group, group)
SELECT `id`, `queue`, `due`, `attempt`, `locked_until`, `done`, `payload`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE `id` = (SELECT `id` FROM `jobs` WHERE `queue` = %s AND `done` IS NULL ORDER BY `due`, `id` LIMIT 1) AND `queue` = %s AND `done` IS NULL AND `due` <= UTC_TIMESTAMP(6) AND (`locked_until` IS NULL OR `locked_until` <= UTC_TIMESTAMP(6)) AND NOT EXISTS (SELECT 1 FROM `jobs` AS __work WHERE __work.`queue` = %s AND __work.`locked_until` > UTC_TIMESTAMP(6)) FOR UPDATE SKIP LOCKED

-- claim[1] (event stamp; params: lease, id)
UPDATE `jobs` SET `locked_until` = %s, `attempt` = `attempt` + 1 WHERE `id` = %s AND (`locked_until` IS NULL OR `locked_until` <= UTC_TIMESTAMP(6))

-- ack (event ack; params: id, token)
UPDATE `jobs` SET `done` = UTC_TIMESTAMP(6), `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry_after (event retry_after; params: delay, id, token)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- dead_letter: none

-- insert (event insert; params: queue, locked_until, done, payload)
INSERT INTO `jobs` (`queue`, `locked_until`, `done`, `payload`) VALUES (%s, %s, %s, %s)

-- snooze (event snooze; params: delay, id, token)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- guard (event guard; params: group, group)
SELECT CAST((SELECT COUNT(*) FROM `jobs` WHERE `queue` = %s AND `done` IS NULL) = (SELECT COUNT(*) FROM (SELECT `id` FROM `jobs` WHERE `queue` = %s AND `done` IS NULL FOR UPDATE SKIP LOCKED) AS __guard) AS SIGNED)

-- heads (event heads; params: limit)
SELECT __head.`queue` FROM (SELECT DISTINCT `queue` AS __group FROM `jobs` WHERE `done` IS NULL) AS __groups JOIN `jobs` AS __head ON __head.`id` = (SELECT __first.`id` FROM `jobs` AS __first WHERE __first.`queue` = __groups.__group AND __first.`done` IS NULL ORDER BY __first.`due`, __first.`id` LIMIT 1) WHERE __head.`due` <= UTC_TIMESTAMP(6) AND NOT EXISTS (SELECT 1 FROM `jobs` AS __work WHERE __work.`queue` = __groups.__group AND __work.`locked_until` > UTC_TIMESTAMP(6)) ORDER BY __head.`due`, __head.`id` LIMIT %s

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

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease_seconds, id0, token0)
SELECT `id`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

-- rounds of 1 [1] (event extend; params: lease, id0, token0)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s))

-- rounds of 3 [0] (event extend; params: lease_seconds, id0, token0, id1, token1, id2, token2)
SELECT `id`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s)) FOR UPDATE

-- rounds of 3 [1] (event extend; params: lease, id0, token0, id1, token1, id2, token2)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s))
