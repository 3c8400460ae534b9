-- SQLite, Advisory form, table shape 'plain', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: held, limit)
SELECT `id`, CAST('jobs-' || ifnull(`id`, '') AS TEXT) AS `__lock` FROM `jobs` WHERE CAST('jobs-' || ifnull(`id`, '') AS TEXT) NOT IN (SELECT value FROM json_each(?)) ORDER BY `id` LIMIT ?

-- ack (event ack; params: id)
DELETE FROM `jobs` WHERE `id` = ?

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: payload)
INSERT INTO `jobs` (`payload`) VALUES (?)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id)
SELECT `id`, `payload` FROM `jobs` WHERE `id` = ?

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
