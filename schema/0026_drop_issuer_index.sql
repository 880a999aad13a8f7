-- Provider tokens are looked up by (account, issuer) only, which
-- auth_providers_account_issuer_key serves; an index on the issuer alone
-- served the lookup across accounts that no longer exists.
DROP INDEX IF EXISTS auth_providers_issuer_idx;
