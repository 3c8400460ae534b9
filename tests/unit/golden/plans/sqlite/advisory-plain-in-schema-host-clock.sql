-- SQLite, Advisory form, table shape 'plain-in-schema', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: held, limit)
SELECT `id`, CAST('jobs-' || ifnull(`id`, '') AS TEXT) AS `__lock` FROM `app`.`jobs` WHERE CAST('jobs-' || ifnull(`id`, '') AS TEXT) NOT IN (SELECT value FROM json_each(?)) ORDER BY `id` LIMIT ?

-- ack (event ack; params: id)
DELETE FROM `app`.`jobs` WHERE `id` = ?

-- retry: none

-- retry_after: none

-- dead_letter[0] (event dead_letter; params: id)
INSERT INTO `app`.`jobs_dead` (`id`, `payload`) SELECT `id`, `payload` FROM `app`.`jobs` WHERE `id` = ?

-- dead_letter[1] (event dead_letter; params: id)
DELETE FROM `app`.`jobs` WHERE `id` = ?

-- insert (event insert; params: payload)
INSERT INTO `app`.`jobs` (`payload`) VALUES (?)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id)
SELECT `id`, `payload` FROM `app`.`jobs` WHERE `id` = ?

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
