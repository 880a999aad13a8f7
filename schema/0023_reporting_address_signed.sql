-- Reporting addresses route as soon as the API can show them: they are
-- minted when a domain is registered, and for a domain registered earlier
-- (or after a key rotation) when GET .../reporting-address first shows
-- them. Minting stays idempotent; their local parts cannot be computed
-- here (the MAC key comes from MAILWATCH_SECRET_KEY, which the database
-- never holds), hence minting on read rather than a backfill.
--
-- Minting used to be what POST .../reporting-address/sign did, and it was
-- the account's choice to receive reports here: the DNS check and the DNS
-- recommendations then ask that the domain's rua names the address. That
-- choice is kept apart from routing: signed_at is when the sign route was
-- called for the address, NULL for one only minted. Every row before this
-- migration came from the sign route.
ALTER TABLE reporting_addresses ADD COLUMN signed_at timestamptz;
UPDATE reporting_addresses SET signed_at = created_at;
