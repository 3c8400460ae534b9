-- MySQL, Advisory form, table shape 'priority', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event candidates; params: group, limit)
SELECT `id`, IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), ''))) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), 256)) AS `__lock` FROM `jobs` WHERE `queue` = %s AND `due` <= UTC_TIMESTAMP(6) AND `done` IS NULL AND IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), ''))) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), 256))) IS NULL ORDER BY `priority`, `due`, `id` LIMIT %s

-- ack (event ack; params: id)
UPDATE `jobs` SET `done` = UTC_TIMESTAMP(6) WHERE `id` = %s

-- retry: none

-- retry_after (event retry_after; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND) WHERE `id` = %s

-- dead_letter: none

-- insert (event insert; params: queue, priority, done, payload)
INSERT INTO `jobs` (`queue`, `priority`, `done`, `payload`) VALUES (%s, %s, %s, %s)

-- snooze (event snooze; params: delay, id)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `attempt` = `attempt` - 1 WHERE `id` = %s

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s AND `queue` = %s AND `due` <= UTC_TIMESTAMP(6) AND `done` IS NULL

-- take[1] (event take; params: id)
SELECT `id`, `queue`, `priority`, `due`, `attempt` - 1 AS `attempt`, `done`, `payload` FROM `jobs` WHERE `id` = %s

-- lock (event lock; params: key)
SELECT CAST(COALESCE(GET_LOCK(%s, 0), 0) AS SIGNED)

-- unlock (event unlock; params: key)
SELECT CAST(COALESCE(RELEASE_LOCK(%s), 0) AS SIGNED)

-- batch: none

-- release: none

-- extend: none

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1: none

-- rounds of 3: none
