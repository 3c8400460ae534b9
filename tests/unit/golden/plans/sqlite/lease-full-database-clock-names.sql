-- SQLite, Lease form, table shape 'full', database-clock-names
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: lease_seconds, limit)
UPDATE `jobs` SET `locked_until` = (strftime('%Y-%m-%d %H:%M:%S', 'now', '+' || ? || ' seconds', '+0.999 seconds') || '.000000'), `attempt` = `attempt` + 1 WHERE `id` IN (SELECT `id` FROM `jobs` WHERE (`queue` IN ('orders.placed', 'it''s') OR substr(`queue`, 1, 9) = 'payments.' OR substr(`queue`, 1, 6) = '100%_\') AND `due` <= (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000') AND `done` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')) ORDER BY `due`, `id` LIMIT ?) RETURNING `id`, `queue`, `due`, `attempt` - 1 AS `attempt`, `locked_until`, `done`, `payload`, `locked_until` AS `__token`

-- ack (event ack; params: id, token)
UPDATE `jobs` SET `done` = (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'), `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry_after (event retry_after; params: delay, id, token)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000'), `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- dead_letter: none

-- insert (event insert; params: queue, locked_until, done, payload)
INSERT INTO `jobs` (`queue`, `locked_until`, `done`, `payload`) VALUES (?, ?, ?, ?)

-- snooze (event snooze; params: delay, id, token)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000'), `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch[0] (event ack; params: ids, token)
UPDATE `jobs` SET `done` = (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'), `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- batch[1] (event retry; params: ids, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- batch[2] (event retry_after; params: delay, ids, token)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000'), `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- batch[3] (event snooze; params: delay, ids, token)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000'), `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- release (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- extend[0] (event extend; params: lease_seconds, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = (strftime('%Y-%m-%d %H:%M:%S', 'now', '+' || ? || ' seconds', '+0.999 seconds') || '.000000') WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`, `locked_until` AS `__token`

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease_seconds, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = (strftime('%Y-%m-%d %H:%M:%S', 'now', '+' || ? || ' seconds', '+0.999 seconds') || '.000000') WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`, `locked_until` AS `__token`

-- rounds of 3 [0] (event extend; params: lease_seconds, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = (strftime('%Y-%m-%d %H:%M:%S', 'now', '+' || ? || ' seconds', '+0.999 seconds') || '.000000') WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`, `locked_until` AS `__token`
