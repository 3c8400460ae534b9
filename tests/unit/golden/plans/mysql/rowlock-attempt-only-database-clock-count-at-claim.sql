-- MySQL, RowLock form, table shape 'attempt-only', database-clock-count-at-claim
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: limit)
SELECT `id`, `attempt`, `payload` FROM `jobs` ORDER BY `id` LIMIT %s FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
DELETE FROM `jobs` WHERE `id` = %s

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: payload)
INSERT INTO `jobs` (`payload`) VALUES (%s)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event count; params: id)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s

-- take[1] (event relock; params: id)
SELECT `id`, `attempt` - 1 AS `attempt`, `payload` FROM `jobs` WHERE `id` = %s FOR UPDATE SKIP LOCKED

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
