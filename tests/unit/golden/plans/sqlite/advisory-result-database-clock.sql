-- SQLite, Advisory form, table shape 'result', database-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: group, held, limit)
SELECT `id`, CAST('jobs-' || ifnull(`id`, '') AS TEXT) AS `__lock` FROM `jobs` WHERE `queue` = ? AND `due` <= (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000') AND `done` IS NULL AND CAST('jobs-' || ifnull(`id`, '') AS TEXT) NOT IN (SELECT value FROM json_each(?)) ORDER BY `due`, `id` LIMIT ?

-- ack (event ack; params: result, id)
UPDATE `jobs` SET `done` = (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'), `receipt` = ? WHERE `id` = ?

-- retry: none

-- retry_after (event retry_after; params: delay, id)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000') WHERE `id` = ?

-- dead_letter: none

-- insert (event insert; params: queue, done, payload)
INSERT INTO `jobs` (`queue`, `done`, `payload`) VALUES (?, ?, ?)

-- snooze (event snooze; params: delay, id)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000'), `attempt` = `attempt` - 1 WHERE `id` = ?

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = ? AND `queue` = ? AND `due` <= (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000') AND `done` IS NULL RETURNING `id`, `queue`, `due`, `attempt` - 1 AS `attempt`, `done`, `payload`, `receipt`

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
