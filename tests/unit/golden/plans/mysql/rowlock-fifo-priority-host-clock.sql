-- MySQL, RowLock form, table shape 'fifo-priority', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, group, now)
SELECT `id`, `queue`, `priority`, `due`, `attempt`, `done`, `payload` FROM `jobs` WHERE `id` = (SELECT `id` FROM `jobs` WHERE `queue` = %s AND `done` IS NULL ORDER BY `priority`, `id` LIMIT 1) AND `queue` = %s AND `done` IS NULL AND `due` <= %s FOR UPDATE SKIP LOCKED

-- ack (event ack; params: now, id)
UPDATE `jobs` SET `done` = %s WHERE `id` = %s

-- retry (event retry; params: id)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s

-- retry_after (event retry_after; params: retry_at, id)
UPDATE `jobs` SET `due` = %s, `attempt` = `attempt` + 1 WHERE `id` = %s

-- dead_letter: none

-- insert (event insert; params: queue, priority, done, payload)
INSERT INTO `jobs` (`queue`, `priority`, `done`, `payload`) VALUES (%s, %s, %s, %s)

-- snooze (event snooze; params: retry_at, id)
UPDATE `jobs` SET `due` = %s WHERE `id` = %s

-- guard (event guard; params: group, group)
SELECT CAST((SELECT COUNT(*) FROM `jobs` WHERE `queue` = %s AND `done` IS NULL) = (SELECT COUNT(*) FROM (SELECT `id` FROM `jobs` WHERE `queue` = %s AND `done` IS NULL FOR UPDATE SKIP LOCKED) AS __guard) AS SIGNED)

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

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
