-- MySQL, RowLock form, table shape 'progress', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, now, limit)
SELECT `id`, `queue`, `due`, `attempt`, `done`, `done_so_far`, `payload` FROM `jobs` WHERE `queue` = %s AND `due` <= %s AND `done` IS NULL ORDER BY `due`, `id` LIMIT %s FOR UPDATE SKIP LOCKED

-- ack (event ack; params: now, id)
UPDATE `jobs` SET `done` = %s WHERE `id` = %s

-- retry (event retry; params: id)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s

-- retry_after (event retry_after; params: retry_at, id)
UPDATE `jobs` SET `due` = %s, `attempt` = `attempt` + 1 WHERE `id` = %s

-- dead_letter: none

-- insert (event insert; params: queue, done, done_so_far, payload)
INSERT INTO `jobs` (`queue`, `done`, `done_so_far`, `payload`) VALUES (%s, %s, %s, %s)

-- snooze (event snooze; params: retry_at, id)
UPDATE `jobs` SET `due` = %s WHERE `id` = %s

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

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
