-- SQLite, Advisory form, table shape 'full', database-clock-limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: counts, group, held, counts, limit)
SELECT `id`, `__lock`, `__slot_key` FROM (SELECT __window.*, ROW_NUMBER() OVER (PARTITION BY `__slot_key` ORDER BY __window.`due`, __window.`id`) AS `__rank` FROM (SELECT `jobs`.`id`, `jobs`.`due`, CAST('jobs-' || ifnull(`id`, '') AS TEXT) AS `__lock`, quote(`jobs`.`tenant`) AS `__slot_key`, (3 - COALESCE((SELECT `__c`.value FROM json_each(?) AS `__c` WHERE `__c`.key = quote(`jobs`.`tenant`)), 0)) AS `__free` FROM `jobs` WHERE `jobs`.`queue` = ? AND `jobs`.`due` <= (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000') AND `jobs`.`done` IS NULL AND CAST('jobs-' || ifnull(`id`, '') AS TEXT) NOT IN (SELECT value FROM json_each(?)) AND (3 - COALESCE((SELECT `__c`.value FROM json_each(?) AS `__c` WHERE `__c`.key = quote(`jobs`.`tenant`)), 0)) > 0 ORDER BY `jobs`.`due`, `jobs`.`id` LIMIT 256) AS __window) AS __ranked WHERE `__free` IS NULL OR `__rank` <= `__free` ORDER BY __ranked.`due`, __ranked.`id` LIMIT ?

-- ack (event ack; params: id)
UPDATE `jobs` SET `done` = (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000') WHERE `id` = ?

-- retry: none

-- retry_after (event retry_after; params: delay, id)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000') WHERE `id` = ?

-- dead_letter: none

-- insert (event insert; params: queue, done, payload, tenant)
INSERT INTO `jobs` (`queue`, `done`, `payload`, `tenant`) VALUES (?, ?, ?, ?)

-- snooze (event snooze; params: delay, id)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000'), `attempt` = `attempt` - 1 WHERE `id` = ?

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = ? AND `queue` = ? AND `due` <= (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000') AND `done` IS NULL RETURNING `id`, `tenant`, `queue`, `due`, `attempt` - 1 AS `attempt`, `done`, `payload`

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
