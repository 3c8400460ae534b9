-- SQLite, Advisory form, table shape 'grouped', limit-whole
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: group, held, limit)
SELECT `id`, `__lock`, `__slot_key` FROM (SELECT __window.*, ROW_NUMBER() OVER (PARTITION BY `__slot_key` ORDER BY __window.`id`) AS `__rank` FROM (SELECT `jobs`.`id`, CAST('jobs-' || ifnull(`id`, '') AS TEXT) AS `__lock`, '' AS `__slot_key`, NULL AS `__free` FROM `jobs` WHERE `jobs`.`queue` = ? AND CAST('jobs-' || ifnull(`id`, '') AS TEXT) NOT IN (SELECT value FROM json_each(?)) ORDER BY `jobs`.`id` LIMIT 256) AS __window) AS __ranked WHERE `__free` IS NULL OR `__rank` <= `__free` ORDER BY __ranked.`id` LIMIT ?

-- ack (event ack; params: id)
DELETE FROM `jobs` WHERE `id` = ?

-- retry: none

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: queue, payload, tenant)
INSERT INTO `jobs` (`queue`, `payload`, `tenant`) VALUES (?, ?, ?)

-- snooze: none

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group)
SELECT `id`, `tenant`, `queue`, `payload` FROM `jobs` WHERE `id` = ? AND `queue` = ?

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
