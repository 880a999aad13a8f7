-- provider_payloads is the write path of every provider webhook, so each
-- inserted row should cost no more than it must:
--
-- * No foreign keys. Each key checked every inserted row with a
--   SELECT ... FOR KEY SHARE on the same provider and account rows, so
--   concurrent batches made multixacts and rewrote those rows. What the keys
--   gave is done explicitly: the insert only stores payloads of a provider
--   that exists, deleting a provider deletes its payloads in the same
--   transaction, the job deletes a payload whose provider went away while
--   it was stored, and deleting an account empties every account_id table.
-- * No index on received_at. Ids are UUIDv7, ordered by the time they were
--   made, so pruning walks the primary key up to the cut-off's id.
ALTER TABLE provider_payloads
    DROP CONSTRAINT provider_payloads_account_id_fkey,
    DROP CONSTRAINT provider_payloads_provider_id_fkey;

DROP INDEX provider_payloads_received_idx;
