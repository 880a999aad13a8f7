-- Normalising jobs work payloads of several accounts in one transaction,
-- each payload in a savepoint of its own: a payload whose normalisation
-- fails is rolled back alone, its attempt counted here and its reason kept
-- in error, and it is retried in a later job. After a bounded number of
-- attempts it is given up: processed_at is set with its error, like a
-- payload that could not be parsed.
ALTER TABLE provider_payloads
    ADD COLUMN attempts smallint NOT NULL DEFAULT 0;
