-- SQLite, Lease form, table shape 'priority', limit-whole
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: group, now, now, limit, group, now, lease)
WITH __window AS (SELECT __row.`priority`, __row.`due`, __row.`id` FROM `jobs` AS __row WHERE __row.`queue` = ? AND __row.`due` <= ? AND __row.`done` IS NULL AND (__row.`locked_until` IS NULL OR __row.`locked_until` <= ?) ORDER BY __row.`priority`, __row.`due`, __row.`id` LIMIT 256), __fits AS (SELECT `priority`, `due`, `id`, ROW_NUMBER() OVER (ORDER BY `priority`, `due`, `id`) AS `__place` FROM __window), __take AS (SELECT `id` FROM __fits WHERE `__place` <= ? AND `__place` + (SELECT COUNT(*) FROM `jobs` WHERE `queue` = ? AND `done` IS NULL AND `locked_until` > ?) <= 20) UPDATE `jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (SELECT `id` FROM __take) RETURNING `id`, `tenant`, `queue`, `priority`, `due`, `attempt` - 1 AS `attempt`, `locked_until`, `done`, `payload`

-- ack (event ack; params: now, id, token)
UPDATE `jobs` SET `done` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry_after (event retry_after; params: retry_at, id, token)
UPDATE `jobs` SET `due` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- dead_letter: none

-- insert (event insert; params: queue, priority, locked_until, done, payload, tenant)
INSERT INTO `jobs` (`queue`, `priority`, `locked_until`, `done`, `payload`, `tenant`) VALUES (?, ?, ?, ?, ?, ?)

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
