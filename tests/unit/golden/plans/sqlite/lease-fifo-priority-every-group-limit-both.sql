-- SQLite, Lease form, table shape 'fifo-priority', every-group-limit-both
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: now, now, now, limit, now, lease)
WITH __live AS (SELECT `tenant` AS `__key`, COUNT(*) AS `__count` FROM `jobs` WHERE `done` IS NULL AND `locked_until` > ? GROUP BY `tenant`), __window AS (SELECT __head.`priority`, __head.`due`, __head.`id`, __head.`tenant` FROM (SELECT DISTINCT `queue` AS __group FROM `jobs` WHERE `done` IS NULL) AS __groups JOIN `jobs` AS __head ON __head.`id` = (SELECT __first.`id` FROM `jobs` AS __first WHERE __first.`queue` = __groups.__group AND __first.`done` IS NULL ORDER BY __first.`priority`, __first.`id` LIMIT 1) WHERE __head.`due` <= ? AND NOT EXISTS (SELECT 1 FROM `jobs` AS __work WHERE __work.`queue` = __groups.__group AND __work.`locked_until` > ?) AND (__head.`tenant` IS NULL OR __head.`tenant` NOT IN (SELECT __live.`__key` FROM __live WHERE __live.`__key` IS NOT NULL AND __live.`__count` >= 3)) AND (__head.`tenant` IS NOT NULL OR NOT EXISTS (SELECT 1 FROM __live WHERE __live.`__key` IS NULL AND __live.`__count` >= 3)) ORDER BY __head.`priority`, __head.`id` LIMIT 256), __ranked AS (SELECT __head.`priority`, __head.`due`, __head.`id`, ROW_NUMBER() OVER (PARTITION BY __head.`tenant` ORDER BY __head.`priority`, __head.`id`) AS `__rank`, COALESCE(__live.`__count`, CASE WHEN __head.`tenant` IS NULL THEN (SELECT `__count` FROM __live WHERE `__key` IS NULL) END, 0) AS `__used` FROM __window AS __head LEFT JOIN __live ON __live.`__key` = __head.`tenant`), __fits AS (SELECT `priority`, `due`, `id`, ROW_NUMBER() OVER (ORDER BY `priority`, `id`) AS `__place` FROM __ranked WHERE `__rank` + `__used` <= 3), __take AS (SELECT `id` FROM __fits WHERE `__place` <= ? AND `__place` + (SELECT COUNT(*) FROM `jobs` WHERE `done` IS NULL AND `locked_until` > ?) <= 20) UPDATE `jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (SELECT `id` FROM __take) RETURNING `id`, `tenant`, `queue`, `priority`, `due`, `attempt` - 1 AS `attempt`, `locked_until`, `done`, `payload`

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
