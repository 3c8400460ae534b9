-- SQLite, Lease form, table shape 'dead-letter-table', database-clock-custom-claim
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN IMMEDIATE

-- plain_begin (event begin; params: none)
BEGIN

-- claim: none

-- ack (event ack; params: id, token)
UPDATE `jobs` SET `done` = (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'), `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry_after (event retry_after; params: delay, id, token)
UPDATE `jobs` SET `due` = (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') || '000'), `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- dead_letter[0] (event dead_letter; params: id, token)
INSERT INTO `jobs_dead` (`id`, `queue`, `due`, `attempt`, `locked_until`, `done`, `payload`) SELECT `id`, `queue`, `due`, `attempt`, NULL, `done`, `payload` FROM `jobs` WHERE `id` = ? AND `locked_until` = ?

-- dead_letter[1] (event dead_letter; params: id, token)
DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?

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

-- stamp (event stamp; params: lease, id, group)
UPDATE `jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` = ? AND `queue` = ? AND `due` <= (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000') AND `done` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'))

-- lease_token (event lease; params: lease_seconds)
SELECT (strftime('%Y-%m-%d %H:%M:%S', 'now', '+' || ? || ' seconds', '+0.999 seconds') || '.000000')

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease_seconds, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = (strftime('%Y-%m-%d %H:%M:%S', 'now', '+' || ? || ' seconds', '+0.999 seconds') || '.000000') WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`, `locked_until` AS `__token`

-- rounds of 3 [0] (event extend; params: lease_seconds, ids, ids, tokens)
UPDATE `jobs` SET `locked_until` = (strftime('%Y-%m-%d %H:%M:%S', 'now', '+' || ? || ' seconds', '+0.999 seconds') || '.000000') WHERE `id` IN (SELECT value FROM json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, `__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` ON `__leases`.key = `__ids`.key) RETURNING `id`, `locked_until` AS `__token`
