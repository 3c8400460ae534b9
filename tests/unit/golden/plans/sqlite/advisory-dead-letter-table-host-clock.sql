-- SQLite, Advisory form, table shape 'dead-letter-table', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event candidates; params: group, now, held, limit)
SELECT `id`, CAST('jobs-' || ifnull(`id`, '') AS TEXT) AS `__lock` FROM `jobs` WHERE `queue` = ? AND `due` <= ? AND `done` IS NULL AND CAST('jobs-' || ifnull(`id`, '') AS TEXT) NOT IN (SELECT value FROM json_each(?)) ORDER BY `due`, `id` LIMIT ?

-- ack (event ack; params: now, id)
UPDATE `jobs` SET `done` = ? WHERE `id` = ?

-- retry: none

-- retry_after (event retry_after; params: retry_at, id)
UPDATE `jobs` SET `due` = ? WHERE `id` = ?

-- dead_letter[0] (event dead_letter; params: id)
INSERT INTO `jobs_dead` (`id`, `queue`, `due`, `attempt`, `done`, `payload`) SELECT `id`, `queue`, `due`, `attempt`, `done`, `payload` FROM `jobs` WHERE `id` = ?

-- dead_letter[1] (event dead_letter; params: id)
DELETE FROM `jobs` WHERE `id` = ?

-- insert (event insert; params: queue, done, payload)
INSERT INTO `jobs` (`queue`, `done`, `payload`) VALUES (?, ?, ?)

-- snooze (event snooze; params: retry_at, id)
UPDATE `jobs` SET `due` = ?, `attempt` = `attempt` - 1 WHERE `id` = ?

-- guard: none

-- heads: none

-- take[0] (event take; params: id, group, now)
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = ? AND `queue` = ? AND `due` <= ? AND `done` IS NULL RETURNING `id`, `queue`, `due`, `attempt` - 1 AS `attempt`, `done`, `payload`

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
