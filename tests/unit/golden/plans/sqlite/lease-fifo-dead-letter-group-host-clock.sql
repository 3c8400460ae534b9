-- SQLite, Lease form, table shape 'fifo-dead-letter-group', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: lease, group, group, now, now, group, now)
UPDATE `jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` = (SELECT `id` FROM `jobs` WHERE `queue` = ? AND `done` IS NULL ORDER BY `id` LIMIT 1) AND `queue` = ? AND `done` IS NULL AND `due` <= ? AND (`locked_until` IS NULL OR `locked_until` <= ?) AND NOT EXISTS (SELECT 1 FROM `jobs` AS __work WHERE __work.`queue` = ? AND __work.`locked_until` > ?) RETURNING `id`, `queue`, `origin`, `due`, `attempt` - 1 AS `attempt`, `locked_until`, `done`, `payload`

-- ack (event ack; params: now, id, token)
UPDATE `jobs` SET `done` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry_after (event retry_after; params: retry_at, id, token)
UPDATE `jobs` SET `due` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- dead_letter[0] (event dead_letter; params: dest, id, token)
UPDATE `jobs` SET `origin` = `queue`, `queue` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- insert (event insert; params: queue, locked_until, done, payload)
INSERT INTO `jobs` (`queue`, `locked_until`, `done`, `payload`) VALUES (?, ?, ?, ?)

-- snooze (event snooze; params: retry_at, id, token)
UPDATE `jobs` SET `due` = ?, `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch[0] (event ack; params: now, ids, token)
UPDATE `jobs` SET `done` = ?, `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- batch[1] (event retry; params: ids, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- batch[2] (event retry_after; params: retry_at, ids, token)
UPDATE `jobs` SET `due` = ?, `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- batch[3] (event snooze; params: retry_at, ids, token)
UPDATE `jobs` SET `due` = ?, `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- release (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- extend[0] (event extend; params: lease, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`

-- rounds of 3 [0] (event extend; params: lease, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`
