-- SQLite, Lease form, table shape 'plain', host-clock
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
BEGIN

-- claim_begin (event begin; params: none)
BEGIN

-- plain_begin (event begin; params: none)
BEGIN

-- claim[0] (event claim; params: lease, now, limit)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT `id` FROM `jobs` WHERE (`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY `id` LIMIT ?) RETURNING `id`, `locked_until`, `payload`

-- ack (event ack; params: id, token)
DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: locked_until, payload)
INSERT INTO `jobs` (`locked_until`, `payload`) VALUES (?, ?)

-- snooze: none

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch[0] (event ack; params: ids, token)
DELETE FROM `jobs` WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

-- batch[1] (event retry; params: ids, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`

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
