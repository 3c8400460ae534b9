-- SQLite, Lease form, table shape 'progress', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: lease, group, now, now, limit)
UPDATE `jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (SELECT `id` FROM `jobs` WHERE `queue` = ? AND `due` <= ? AND `done` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY `due`, `id` LIMIT ?) RETURNING `id`, `queue`, `due`, `attempt` - 1 AS `attempt`, `locked_until`, `done`, `done_so_far`, `payload`

-- ack (event ack; params: now, id, token)
UPDATE `jobs` SET `done` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry_after (event retry_after; params: retry_at, id, token)
UPDATE `jobs` SET `due` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- dead_letter: none

-- insert (event insert; params: queue, locked_until, done, done_so_far, payload)
INSERT INTO `jobs` (`queue`, `locked_until`, `done`, `done_so_far`, `payload`) VALUES (?, ?, ?, ?, ?)

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

-- extend_progress[0] (event extend; params: lease, ids, progress, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ?, `done_so_far` = COALESCE((SELECT `__progress`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__progress` ON `__progress`.key = `__ids`.key WHERE `__ids`.value = `jobs`.`id`), `done_so_far`) WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`

-- rounds of 3 [0] (event extend; params: lease, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`

-- rounds of 1 with progress [0] (event extend; params: lease, ids, progress, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ?, `done_so_far` = COALESCE((SELECT `__progress`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__progress` ON `__progress`.key = `__ids`.key WHERE `__ids`.value = `jobs`.`id`), `done_so_far`) WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`

-- rounds of 3 with progress [0] (event extend; params: lease, ids, progress, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ?, `done_so_far` = COALESCE((SELECT `__progress`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__progress` ON `__progress`.key = `__ids`.key WHERE `__ids`.value = `jobs`.`id`), `done_so_far`) WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`
