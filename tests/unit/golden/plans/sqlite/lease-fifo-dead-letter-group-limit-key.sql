-- SQLite, Lease form, table shape 'fifo-dead-letter-group', limit-key
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: now, group, group, now, now, group, now, limit, lease)
WITH __live AS (SELECT `tenant` AS `__key`, COUNT(*) AS `__count` FROM `jobs` WHERE `done` IS NULL AND `locked_until` > ? GROUP BY `tenant`), __window AS (SELECT __row.`due`, __row.`id`, __row.`tenant` FROM `jobs` AS __row WHERE `id` = (SELECT `id` FROM `jobs` WHERE `queue` = ? AND `done` IS NULL ORDER BY `id` LIMIT 1) AND `queue` = ? AND `done` IS NULL AND `due` <= ? AND (`locked_until` IS NULL OR `locked_until` <= ?) AND NOT EXISTS (SELECT 1 FROM `jobs` AS __work WHERE __work.`queue` = ? AND __work.`locked_until` > ?) AND (__row.`tenant` IS NULL OR __row.`tenant` NOT IN (SELECT __live.`__key` FROM __live WHERE __live.`__key` IS NOT NULL AND __live.`__count` >= 3)) AND (__row.`tenant` IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live.`__key` IS NULL AND __live.`__count` >= 3)) ORDER BY __row.`id` LIMIT 256), __ranked AS (SELECT __row.`due`, __row.`id`, ROW_NUMBER() OVER (PARTITION BY __row.`tenant` ORDER BY __row.`id`) AS `__rank`, COALESCE(__live.`__count`, CASE WHEN __row.`tenant` IS NULL THEN (SELECT `__count` FROM __live WHERE `__key` IS NULL) END, 0) AS `__used` FROM __window AS __row LEFT JOIN __live ON __live.`__key` = __row.`tenant`), __fits AS (SELECT `due`, `id`, ROW_NUMBER() OVER (ORDER BY `id`) AS `__place` FROM __ranked WHERE `__rank` + `__used` <= 3), __take AS (SELECT `id` FROM __fits WHERE `__place` <= ?) UPDATE `jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (SELECT `id` FROM __take) RETURNING `id`, `tenant`, `queue`, `origin`, `due`, `attempt` - 1 AS `attempt`, `locked_until`, `done`, `payload`

-- ack (event ack; params: now, id, token)
UPDATE `jobs` SET `done` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry_after (event retry_after; params: retry_at, id, token)
UPDATE `jobs` SET `due` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- dead_letter[0] (event dead_letter; params: dest, id, token)
UPDATE `jobs` SET `origin` = `queue`, `queue` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- insert (event insert; params: queue, locked_until, done, payload, tenant)
INSERT INTO `jobs` (`queue`, `locked_until`, `done`, `payload`, `tenant`) VALUES (?, ?, ?, ?, ?)

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
