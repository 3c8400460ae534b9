-- MySQL, RowLock form, table shape 'fifo-dead-letter-group', database-clock-every-group
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, group)
SELECT `id`, `queue`, `origin`, `due`, `attempt`, `done`, `payload` FROM `jobs` WHERE `id` = (SELECT `id` FROM `jobs` WHERE `queue` = %s AND `done` IS NULL ORDER BY `id` LIMIT 1) AND `queue` = %s AND `done` IS NULL AND `due` <= UTC_TIMESTAMP(6) FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE `jobs` SET `done` = UTC_TIMESTAMP(6) WHERE `id` = %s

-- retry (event retry; params: id)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s

-- retry_after (event retry_after; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `attempt` = `attempt` + 1 WHERE `id` = %s

-- dead_letter[0] (event dead_letter; params: dest, id)
UPDATE `jobs` SET `origin` = `queue`, `queue` = %s WHERE `id` = %s

-- insert (event insert; params: queue, done, payload)
INSERT INTO `jobs` (`queue`, `done`, `payload`) VALUES (%s, %s, %s)

-- snooze (event snooze; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND) WHERE `id` = %s

-- guard (event guard; params: group, group)
SELECT CAST((SELECT COUNT(*) FROM `jobs` WHERE `queue` = %s AND `done` IS NULL) = (SELECT COUNT(*) FROM (SELECT `id` FROM `jobs` WHERE `queue` = %s AND `done` IS NULL FOR UPDATE SKIP LOCKED) AS __guard) AS SIGNED)

-- heads (event heads; params: limit)
SELECT __head.`queue` FROM (SELECT DISTINCT `queue` AS __group FROM `jobs` WHERE `done` IS NULL AND `queue` <> 'dead') AS __groups JOIN `jobs` AS __head ON __head.`id` = (SELECT __first.`id` FROM `jobs` AS __first WHERE __first.`queue` = __groups.__group AND __first.`done` IS NULL ORDER BY __first.`id` LIMIT 1) WHERE __head.`due` <= UTC_TIMESTAMP(6) ORDER BY __head.`id` LIMIT %s

-- take: none

-- lock: none

-- unlock: none

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
