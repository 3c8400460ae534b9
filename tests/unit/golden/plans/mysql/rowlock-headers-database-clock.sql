-- MySQL, RowLock form, table shape 'headers', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, limit)
SELECT `id`, `queue`, `due`, `attempt`, `done`, `payload`, `headers` FROM `jobs` WHERE `queue` = %s AND `due` <= UTC_TIMESTAMP(6) AND `done` IS NULL ORDER BY `due`, `id` LIMIT %s FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE `jobs` SET `done` = UTC_TIMESTAMP(6) WHERE `id` = %s

-- retry (event retry; params: id)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s

-- retry_after (event retry_after; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `attempt` = `attempt` + 1 WHERE `id` = %s

-- dead_letter[0] (event dead_letter; params: id)
INSERT INTO `jobs_dead` (`id`, `queue`, `due`, `attempt`, `done`, `payload`, `headers`) SELECT `id`, `queue`, `due`, `attempt`, `done`, `payload`, `headers` FROM `jobs` WHERE `id` = %s

-- dead_letter[1] (event dead_letter; params: id)
DELETE FROM `jobs` WHERE `id` = %s

-- insert (event insert; params: queue, done, payload, headers)
INSERT INTO `jobs` (`queue`, `done`, `payload`, `headers`) VALUES (%s, %s, %s, %s)

-- snooze (event snooze; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND) WHERE `id` = %s

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
