-- SQLite, Advisory form, table shape 'grouped', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: group, held, limit)
SELECT `id`, CAST('jobs-' || ifnull(`id`, '') AS TEXT) AS `__lock` FROM `jobs` WHERE `queue` = ? AND CAST('jobs-' || ifnull(`id`, '') AS TEXT) NOT IN (SELECT value FROM json_each(?)) ORDER BY `id` LIMIT ?

-- ack (event ack; params: id)
DELETE FROM `jobs` WHERE `id` = ?

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: queue, payload)
INSERT INTO `jobs` (`queue`, `payload`) VALUES (?, ?)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group)
SELECT `id`, `queue`, `payload` FROM `jobs` WHERE `id` = ? AND `queue` = ?

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
