-- MySQL, Lease form, table shape 'grouped', every-name
-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py

-- begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- plain_begin (event begin; params: none)
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- claim[0] (event claim; params: now, limit)
SELECT `id`, `queue`, `locked_until`, `payload` FROM `jobs` WHERE (`locked_until` IS NULL OR `locked_until` <= %s) ORDER BY `id` LIMIT %s FOR UPDATE SKIP LOCKED

-- claim[1] (event stamp; params: lease, id, now)
UPDATE `jobs` SET `locked_until` = %s WHERE `id` = %s AND (`locked_until` IS NULL OR `locked_until` <= %s)

-- ack (event ack; params: id, token)
DELETE FROM `jobs` WHERE `id` = %s AND `locked_until` = %s

-- retry (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- retry_after: none

-- dead_letter: none

-- insert (event insert; params: queue, locked_until, payload)
INSERT INTO `jobs` (`queue`, `locked_until`, `payload`) VALUES (%s, %s, %s)

-- snooze: none

-- guard: none

-- heads: none

-- take: none

-- lock: none

-- unlock: none

-- batch: none

-- release (event retry; params: id, token)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s

-- extend[0] (event extend; params: id0, token0)
SELECT `id` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

-- extend[1] (event extend; params: lease, id0, token0)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s))

-- fetch: none

-- stamp: none

-- lease_token: none

-- key_slots: none

-- rounds of 1 [0] (event extend; params: id0, token0)
SELECT `id` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE

-- rounds of 1 [1] (event extend; params: lease, id0, token0)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s))

-- rounds of 3 [0] (event extend; params: id0, token0, id1, token1, id2, token2)
SELECT `id` FROM `jobs` WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s)) FOR UPDATE

-- rounds of 3 [1] (event extend; params: lease, id0, token0, id1, token1, id2, token2)
UPDATE `jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN ((%s, %s), (%s, %s), (%s, %s))
