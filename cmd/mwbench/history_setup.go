package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// historySeed is what the seeding made for the measurements.
type historySeed struct {
	Size    historySize
	Now     time.Time // the history spans the historySpanDays days before Now
	Account uuid.UUID // the measured account
	Key     string
	Cookie  string // its dashboard session, "mw_session=..."
	Busy    string // the domain with the largest share of DMARC traffic
	Rows    historyRows
}

// historyAccount is one seeded account: the measured one or a noise one.
type historyAccount struct {
	ID        uuid.UUID
	Share     float64 // of the measured account's rows
	Providers []historyProvider
	Domains   []uuid.UUID
	Names     []string
}

type historyProvider struct {
	ID   uuid.UUID
	Kind string
	Prob float64 // share of the account's payloads
}

// historyHelpersSQL creates the bench's own functions and tables; they are
// dropped when the seeding ends.
const historyHelpersSQL = `
CREATE FUNCTION mwbench_uuidv7(ts timestamptz, salt text) RETURNS uuid LANGUAGE sql STABLE AS $$
  SELECT (lpad(to_hex(floor(extract(epoch FROM ts) * 1000)::bigint), 12, '0') ||
          overlay(overlay(substr(md5(salt), 1, 20) placing '7' from 1) placing '8' from 5))::uuid
$$;
CREATE FUNCTION mwbench_at(start timestamptz, span float8, whole boolean, n int, j int) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
  SELECT start + make_interval(secs => span * CASE WHEN whole
    THEN (j + 0.5::float8) / n - 0.6 * sin(2 * pi() * (j + 0.5::float8) / n) / (2 * pi())
    ELSE (j + 0.5::float8) / n END)
$$;
CREATE FUNCTION mwbench_rfc3339(ts timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT rtrim(rtrim(to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z'
$$;
CREATE FUNCTION mwbench_slot(a bigint, b bigint) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT ((hashint8(a * 100000000 + b) & 2147483647) % 120)::int
$$;
CREATE FUNCTION mwbench_ip(k int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT '10.' || ((k >> 16) & 255) || '.' || ((k >> 8) & 255) || '.' || (k & 255)
$$;
CREATE TABLE mwbench_slots (slot int PRIMARY KEY, account_id uuid NOT NULL, provider_id uuid NOT NULL,
  provider_kind text NOT NULL, domain_ids uuid[] NOT NULL, domain_names text[] NOT NULL, ndomains int NOT NULL);
CREATE TABLE mwbench_domains (rank int PRIMARY KEY, account_id uuid NOT NULL, domain_id uuid NOT NULL, name text NOT NULL,
  orgs int NOT NULL, rec_base float8 NOT NULL, pool int NOT NULL, pool_off int NOT NULL);
CREATE TABLE mwbench_orgs (oi int PRIMARY KEY, org text NOT NULL, email text NOT NULL);
INSERT INTO mwbench_orgs VALUES (0, 'google.com', 'noreply-dmarc-support@google.com'),
  (1, 'Enterprise Outlook', 'dmarcreport@microsoft.com'), (2, 'Yahoo', 'dmarchelp@yahooinc.com'),
  (3, 'comcast.net', 'dmarc_reports@comcast.net'), (4, 'icloud.com', 'dmarc_agg@icloud.com'),
  (5, 'orange.fr', 'dmarc@orange.fr'), (6, 'Mail.Ru', 'dmarc_support@corp.mail.ru'), (7, 'web.de', 'dmarc@web.de');
`

const historyDropHelpersSQL = `
DROP TABLE mwbench_slots, mwbench_domains, mwbench_orgs;
DROP FUNCTION mwbench_uuidv7, mwbench_at, mwbench_rfc3339, mwbench_slot, mwbench_ip;
`

// seedHistorySetup writes what the firehose rows refer to: the noise
// accounts, every account's plan (business: 90 days of events), providers,
// domains with a DMARC record at p=none, one event subscription each, the
// measured account's health history, and the bench's helper tables.
func seedHistorySetup(ctx context.Context, env *benchEnv, seed *historySeed) ([]historyAccount, error) {
	if _, err := env.Pool.Exec(ctx, historyHelpersSQL); err != nil {
		return nil, fmt.Errorf("error creating the seeding helpers: %w", err)
	}
	accounts := []historyAccount{{ID: seed.Account, Share: 1, Providers: []historyProvider{
		{Kind: "sendgrid", Prob: 0.5}, {Kind: "ses", Prob: 0.3}, {Kind: "postmark", Prob: 0.2}}}}
	for i, kind := range []string{"sendgrid", "ses", "postmark", "mailgun"}[:historyNoiseAccounts] {
		a := historyAccount{ID: uuid.Must(uuid.NewV7()), Share: historyNoiseShare, Providers: []historyProvider{{Kind: kind, Prob: 1}}}
		if _, err := env.Pool.Exec(ctx, `INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'not-a-hash')`,
			a.ID, fmt.Sprintf("noise-%d@history.example", i)); err != nil {
			return nil, err
		}
		accounts = append(accounts, a)
	}
	for i := range accounts {
		if err := seedHistoryAccount(ctx, env, &accounts[i], i); err != nil {
			return nil, err
		}
	}
	seed.Busy = accounts[0].Names[0]
	if err := seedHistorySlots(ctx, env, accounts); err != nil {
		return nil, err
	}
	if err := seedHistoryDMARCDomains(ctx, env, accounts, seed.Size); err != nil {
		return nil, err
	}
	_, err := env.Pool.Exec(ctx, `INSERT INTO domain_health_history (id, domain_id, score, report, computed_at)
		SELECT mwbench_uuidv7(at, 'h' || d.id || i), d.id, 60 + (hashint4(i) & 31), '{}', at
		FROM domains d, generate_series(0, $2::int - 1) i,
		LATERAL (SELECT $3::timestamptz - (i * interval '1 day') AS at) x
		WHERE d.account_id = $1
		ORDER BY at`, seed.Account, historySpanDays, seed.Now)
	if err != nil {
		return nil, fmt.Errorf("error seeding health history: %w", err)
	}
	return accounts, nil
}

// seedHistoryAccount writes one account's plan, providers, domains and
// subscription; account 0 is the measured one, with historyDomains
// domains, the first of them the busy one.
func seedHistoryAccount(ctx context.Context, env *benchEnv, a *historyAccount, n int) error {
	if err := setBenchPlan(ctx, env, a.ID.String()); err != nil {
		return err
	}
	for i := range a.Providers {
		a.Providers[i].ID = uuid.Must(uuid.NewV7())
		if _, err := env.Pool.Exec(ctx, `INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id)
			VALUES ($1, $2, $3, $3, '\x00', 'bench')`, a.Providers[i].ID, a.ID, a.Providers[i].Kind); err != nil {
			return fmt.Errorf("error seeding a provider: %w", err)
		}
	}
	count := historyNoiseDomains
	if n == 0 {
		count = historyDomains
	}
	for i := 0; i < count; i++ {
		name := fmt.Sprintf("n%d-d%d.example.net", n, i)
		switch {
		case n == 0 && i == 0:
			name = "busy.example.com"
		case n == 0:
			name = fmt.Sprintf("d%03d.example.com", i)
		}
		a.Domains, a.Names = append(a.Domains, uuid.Must(uuid.NewV7())), append(a.Names, name)
	}
	results, err := json.Marshal(dnscheck.Results{Domain: "__DOMAIN__", DMARC: &dnscheck.DMARCResult{
		Policy: "none", Parsed: &dmarc.Record{Policy: "none", ADKIM: "r", ASPF: "r"}}})
	if err != nil {
		return err
	}
	_, err = env.Pool.Exec(ctx, `INSERT INTO domains (id, account_id, name, results, score, checked_at, scored_at)
		SELECT id, $1, name, replace($4, '__DOMAIN__', name)::jsonb, 40 + (hashtext(name) & 63) % 61, now(), now()
		FROM unnest($2::uuid[], $3::text[]) AS x(id, name)`, a.ID, a.Domains, a.Names, string(results))
	if err != nil {
		return fmt.Errorf("error seeding domains: %w", err)
	}
	_, err = env.Pool.Exec(ctx, `INSERT INTO sending_provider_links (provider_id, domain_id)
		SELECT p, d FROM unnest($1::uuid[]) p, unnest($2::uuid[]) d`, providerIDs(a.Providers), a.Domains)
	if err != nil {
		return fmt.Errorf("error linking providers: %w", err)
	}
	_, err = env.Pool.Exec(ctx, `INSERT INTO event_subscriptions (id, account_id, url, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, 'https://hooks.example.com/mailwatch', '\x00', 'bench')`, uuid.Must(uuid.NewV7()), a.ID)
	return err
}

func providerIDs(ps []historyProvider) []uuid.UUID {
	out := make([]uuid.UUID, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// seedHistorySlots fills mwbench_slots: 120 slots, each an (account,
// provider) pair, in proportion to each account's share of the rows and
// each provider's share of the account's payloads. A payload (and its
// message events) or an event takes the slot its hash names.
func seedHistorySlots(ctx context.Context, env *benchEnv, accounts []historyAccount) error {
	total := 0.0
	for _, a := range accounts {
		total += a.Share
	}
	slot := 0
	for i, a := range accounts {
		n := int(math.Round(120 * a.Share / total))
		if i == len(accounts)-1 {
			n = 120 - slot
		}
		for j := 0; j < n; j++ {
			p := a.Providers[len(a.Providers)-1]
			acc := 0.0
			for _, cand := range a.Providers {
				if acc += cand.Prob; float64(j)/float64(n) < acc {
					p = cand
					break
				}
			}
			if _, err := env.Pool.Exec(ctx, `INSERT INTO mwbench_slots VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				slot, a.ID, p.ID, p.Kind, a.Domains, a.Names, len(a.Domains)); err != nil {
				return err
			}
			slot++
		}
	}
	return nil
}
