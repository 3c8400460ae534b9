-- MySQL, Lease form, table shape 'full', database-clock-custom-claim
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim: none

-- ack (event ack; params: id, token)
UPDATE `jobs` SET `done` = UTC_TIMESTAMP(6), `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry_after (event retry_after; params: delay, id, token)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- dead_letter: none

-- insert (event insert; params: queue, locked_until, done, payload)
INSERT INTO `jobs` (`queue`, `locked_until`, `done`, `payload`) VALUES (%s, %s, %s, %s)

-- snooze (event snooze; params: delay, id, token)
UPDATE `jobs` SET `due` = (UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch: none

-- release (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- extend[0] (event extend; params: lease_seconds, id0, token0)
SELECT `id`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

-- extend[1] (event extend; params: lease, id0, token0)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s))

-- fetch: none

-- stamp (event stamp; params: lease, id, group)
UPDATE `jobs` SET `locked_until` = %s, `attempt` = `attempt` + 1 WHERE `id` = %s AND `queue` = %s AND `due` <= UTC_TIMESTAMP(6) AND `done` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= UTC_TIMESTAMP(6))

-- lease_token (event lease; params: lease_seconds)
SELECT (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND)

-- key_slots: none

-- rounds of 1 [0] (event extend; params: lease_seconds, id0, token0)
SELECT `id`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

-- rounds of 1 [1] (event extend; params: lease, id0, token0)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s))

-- rounds of 3 [0] (event extend; params: lease_seconds, id0, token0, id1, token1, id2, token2)
SELECT `id`, (UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL (%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND) AS `__token` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s)) FOR UPDATE

-- rounds of 3 [1] (event extend; params: lease, id0, token0, id1, token1, id2, token2)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s))
