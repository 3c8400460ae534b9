-- MySQL, RowLock form, table shape 'dead-letter-table-dated', database-clock-count-at-claim
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: group, limit)
SELECT `id`, `queue`, `due`, `attempt`, `done`, `died`, `payload` FROM `jobs` WHERE `queue` = %s AND `due` <= UTC_TIMESTAMP(6) AND `done` IS NULL ORDER BY `due`, `id` LIMIT %s FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
UPDATE `jobs` SET `done` = UTC_TIMESTAMP(6) WHERE `id` = %s

-- retry: none

-- retry_after (event retry_after; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND) WHERE `id` = %s

-- dead_letter[0] (event dead_letter; params: id)
INSERT INTO `jobs_dead` (`id`, `queue`, `due`, `attempt`, `done`, `died`, `payload`) SELECT `id`, `queue`, `due`, `attempt`, `done`, UTC_TIMESTAMP(6), `payload` FROM `jobs` WHERE `id` = %s

-- dead_letter[1] (event dead_letter; params: id)
DELETE FROM `jobs` WHERE `id` = %s

-- insert (event insert; params: queue, done, died, payload)
INSERT INTO `jobs` (`queue`, `done`, `died`, `payload`) VALUES (%s, %s, %s, %s)

-- snooze (event snooze; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `attempt` = `attempt` - 1 WHERE `id` = %s

-- guard: none

-- heads: none

-- take[0] (event count; params: id)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s

-- take[1] (event relock; params: id, group)
SELECT `id`, `queue`, `due`, `attempt` - 1 AS `attempt`, `done`, `died`, `payload` FROM `jobs` WHERE `id` = %s AND `queue` = %s AND `due` <= UTC_TIMESTAMP(6) AND `done` IS NULL FOR UPDATE SKIP LOCKED

-- lock (event lock; params: key)
SELECT GET_LOCK(SHA2(CONCAT_WS('.', DATABASE(), %s), 256), 31536000)

-- unlock (event unlock; params: key)
SELECT RELEASE_LOCK(SHA2(CONCAT_WS('.', DATABASE(), %s), 256))

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
