-- MySQL, RowLock form, table shape 'retry-after-only', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: limit)
SELECT `id`, `due`, `payload` FROM `jobs` WHERE `due` <= UTC_TIMESTAMP(6) ORDER BY `due`, `id` LIMIT %s FOR UPDATE SKIP LOCKED

-- ack (event ack; params: id)
DELETE FROM `jobs` WHERE `id` = %s

-- retry: none

-- retry_after (event retry_after; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND) WHERE `id` = %s

-- dead_letter: none

-- insert (event insert; params: payload)
INSERT INTO `jobs` (`payload`) VALUES (%s)

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
