-- MySQL, Advisory form, table shape 'retry-after-only', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event candidates; params: now, limit)
SELECT `id`, IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), ''))) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), 256)) AS `__lock` FROM `jobs` WHERE `due` <= %s AND IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), ''))) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', COALESCE(CAST(`id` AS CHAR), '')), 256))) IS NULL ORDER BY `due`, `id` LIMIT %s

-- ack (event ack; params: id)
DELETE FROM `jobs` WHERE `id` = %s

-- retry: none

-- retry_after (event retry_after; params: retry_at, id)
UPDATE `jobs` SET `due` = %s WHERE `id` = %s

-- dead_letter: none

-- insert (event insert; params: payload)
INSERT INTO `jobs` (`payload`) VALUES (%s)

-- snooze (event snooze; params: retry_at, id)
UPDATE `jobs` SET `due` = %s WHERE `id` = %s

-- guard: none

-- heads: none

-- take[0] (event take; params: id, now)
SELECT `id`, `due`, `payload` FROM `jobs` WHERE `id` = %s AND `due` <= %s

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
