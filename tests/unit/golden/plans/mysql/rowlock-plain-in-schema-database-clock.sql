-- MySQL, RowLock form, table shape 'plain-in-schema', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: limit)
SELECT `id`, `payload` FROM `app`.`jobs` ORDER BY `id` LIMIT %s FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
DELETE FROM `app`.`jobs` WHERE `id` = %s

-- retry: none

-- retry_after: none

-- dead_letter[0] (event dead_letter; params: id)
INSERT INTO `app`.`jobs_dead` (`id`, `payload`) SELECT `id`, `payload` FROM `app`.`jobs` WHERE `id` = %s

-- dead_letter[1] (event dead_letter; params: id)
DELETE FROM `app`.`jobs` WHERE `id` = %s

-- insert (event insert; params: payload)
INSERT INTO `app`.`jobs` (`payload`) VALUES (%s)

-- snooze: none

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
