-- SQLite, Lease form, table shape 'priority', limit-rate-key
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: rate_group, now, now, now, now, now, now, group, now, now, group, now, now, limit, lease)
WITH __tats AS (SELECT rate_key AS `__rk`, tat AS `__tat` FROM `app_rates` WHERE tbl = 'jobs' AND grp = ?), __rated AS (SELECT __row.`id` AS `__rid`, ROW_NUMBER() OVER (PARTITION BY __row.`tenant` ORDER BY __row.`priority`, __row.`due`, __row.`id`) AS `__rrank`, (100 * ((CAST(strftime('%s', substr(?, 1, 19)) AS INTEGER) * 1000000 + CAST(substr(?, 21, 6) AS INTEGER)) + 10000000 - MAX(COALESCE(__tats.`__tat`, (CAST(strftime('%s', substr(?, 1, 19)) AS INTEGER) * 1000000 + CAST(substr(?, 21, 6) AS INTEGER))), (CAST(strftime('%s', substr(?, 1, 19)) AS INTEGER) * 1000000 + CAST(substr(?, 21, 6) AS INTEGER))))) / 10000000 AS `__allow` FROM `jobs` AS __row LEFT JOIN __tats ON __tats.`__rk` = COALESCE('v' || CAST(__row.`tenant` AS TEXT), 'n') WHERE __row.`queue` = ? AND __row.`due` <= ? AND __row.`done` IS NULL AND (__row.`locked_until` IS NULL OR __row.`locked_until` <= ?)), __window AS (SELECT __row.`priority`, __row.`due`, __row.`id` FROM `jobs` AS __row WHERE __row.`queue` = ? AND __row.`due` <= ? AND __row.`done` IS NULL AND (__row.`locked_until` IS NULL OR __row.`locked_until` <= ?) AND `id` IN (SELECT `__rid` FROM __rated WHERE `__rrank` <= `__allow`) ORDER BY __row.`priority`, __row.`due`, __row.`id` LIMIT 256), __fits AS (SELECT `priority`, `due`, `id`, ROW_NUMBER() OVER (ORDER BY `priority`, `due`, `id`) AS `__place` FROM __window), __take AS (SELECT `id` FROM __fits WHERE `__place` <= ?) UPDATE `jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (SELECT `id` FROM __take) RETURNING `id`, `tenant`, `queue`, `priority`, `due`, `attempt` - 1 AS `attempt`, `locked_until`, `done`, `payload`

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

-- rate_advance (event rate; params: rate_group, now, now, starts, id, now, now, starts)
INSERT INTO `app_rates` AS `__r` (tbl, grp, rate_key, tat) SELECT 'jobs', ?, COALESCE('v' || CAST(`tenant` AS TEXT), 'n'), (CAST(strftime('%s', substr(?, 1, 19)) AS INTEGER) * 1000000 + CAST(substr(?, 21, 6) AS INTEGER)) + (? * 10000000 + 99) / 100 FROM `jobs` WHERE `id` = ? ON CONFLICT (tbl, grp, rate_key) DO UPDATE SET tat = MAX(`__r`.tat, (CAST(strftime('%s', substr(?, 1, 19)) AS INTEGER) * 1000000 + CAST(substr(?, 21, 6) AS INTEGER))) + (? * 10000000 + 99) / 100

-- rate_key_index: 1

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`

-- rounds of 3 [0] (event extend; params: lease, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`
