package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// sourceDay is a dmarc_source_days row without its domain.
type sourceDay struct {
	Day                                                              time.Time
	SourceIP                                                         string
	Messages, DKIMAligned, SPFAligned, Compliant, Forwarded, Failing int64
	Selectors                                                        []string
}

func readSourceDays(t *testing.T, db *benchEnv, domain uuid.UUID) []sourceDay {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT day, source_ip, messages, dkim_aligned, spf_aligned, compliant,
		forwarded, failing, dkim_selectors FROM dmarc_source_days WHERE domain_id = $1 ORDER BY day, source_ip`, domain)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sourceDay, error) {
		var s sourceDay
		err := r.Scan(&s.Day, &s.SourceIP, &s.Messages, &s.DKIMAligned, &s.SPFAligned, &s.Compliant, &s.Forwarded, &s.Failing, &s.Selectors)
		return s, err
	})
	require.NoError(t, err)
	return out
}

// testRecord is one record of a test aggregate report for example.com.
type testRecord struct {
	ip                   string
	count                int
	dkim, spf            string
	dkimDomain           string
	selector             string
	spfDomain, spfResult string
}

func testReportXML(org string, day time.Time, recs []testRecord) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<feedback><report_metadata><org_name>%s</org_name><email>dmarc@%s</email><report_id>%s-1</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><p>none</p></policy_published>
`, org, org, org, day.Unix(), day.Add(24*time.Hour-time.Second).Unix())
	for _, r := range recs {
		fmt.Fprintf(&b, `<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition>`+
			`<dkim>%s</dkim><spf>%s</spf></policy_evaluated></row><identifiers><header_from>example.com</header_from></identifiers>`+
			`<auth_results><dkim><domain>%s</domain><selector>%s</selector><result>%s</result></dkim>`,
			r.ip, r.count, r.dkim, r.spf, r.dkimDomain, r.selector, r.dkim)
		if r.spfDomain != "" {
			fmt.Fprintf(&b, `<spf><domain>%s</domain><result>%s</result></spf>`, r.spfDomain, r.spfResult)
		}
		b.WriteString("</auth_results></record>\n")
	}
	b.WriteString("</feedback>\n")
	return b.Bytes()
}

// TestHistorySourceDaysMatchIngest holds the bench's derivation of
// dmarc_source_days (historySourceDaysSQL) to what internal/reports writes
// when it parses the same reports: compliant by aligned SPF or DKIM,
// forwarded (aligned DKIM, no SPF result passed), failing, the selectors of
// the domain's own signatures lower-cased, two reports of a day summed.
func TestHistorySourceDaysMatchIngest(t *testing.T) {
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	env := &benchEnv{Pool: pool}
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	svc := &reports.Service{DB: pool, River: client, Emitter: &events.Emitter{River: client},
		Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }}
	account := uuid.Must(uuid.NewV7())
	q := dbsqlc.New()
	_, err = q.AccountInsert(ctx, pool, dbsqlc.AccountInsertParams{ID: account, Email: "h@example.com", PasswordHash: "x"})
	require.NoError(t, err)
	d, err := q.DomainInsert(ctx, pool, dbsqlc.DomainInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: account, Name: "example.com", Tags: []string{}})
	require.NoError(t, err)

	day := time.Date(2025, 12, 30, 0, 0, 0, 0, time.UTC)
	for org, recs := range map[string][]testRecord{
		"google.com": {
			{"10.0.0.1", 5, "pass", "pass", "example.com", "s1", "example.com", "pass"},
			{"10.0.0.1", 3, "pass", "fail", "example.com", "S2", "bounce.example.com", "fail"}, // forwarded
			{"10.0.0.2", 7, "pass", "fail", "example.com", "s1", "example.net", "pass"},        // SPF passed unaligned: compliant
			{"10.0.0.3", 11, "fail", "fail", "other.example", "s9", "other.example", "fail"},   // failing, no selector of ours
			{"10.0.0.3", 2, "fail", "pass", "other.example", "s9", "example.com", "pass"},
			{"10.0.0.4", 4, "pass", "fail", "example.com", "s1", "", ""}, // forwarded, no SPF result at all
		},
		"yahoo.com": {
			{"10.0.0.1", 6, "pass", "pass", "example.com", "s3", "example.com", "pass"},
			{"10.0.0.2", 1, "pass", "pass", "example.com", "", "example.com", "pass"},
		},
	} {
		var rec reports.Received
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			rec, err = svc.Receive(ctx, tx, reports.Incoming{AccountID: account, DomainID: d.ID, Kind: reports.KindDMARC,
				Source: reports.SourceUpload, Raw: testReportXML(org, day, recs)})
			return err
		}))
		out, err := svc.Parse(ctx, rec.MessageID)
		require.NoError(t, err)
		require.Equal(t, reports.StatusAccepted, out.Status, out.Reason)
	}
	ingested := readSourceDays(t, env, d.ID)
	require.Len(t, ingested, 4)
	require.Equal(t, sourceDay{Day: day, SourceIP: "10.0.0.1", Messages: 14, DKIMAligned: 14, SPFAligned: 11, Compliant: 11,
		Forwarded: 3, Selectors: []string{"s1", "s2", "s3"}}, ingested[0], "the example's own reading of the rules")

	_, err = pool.Exec(ctx, "DELETE FROM dmarc_source_days WHERE domain_id = $1", d.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, historySourceDaysSQL, day.AddDate(0, 0, -1), day.AddDate(0, 0, 2), d.ID)
	require.NoError(t, err)
	require.Equal(t, ingested, readSourceDays(t, env, d.ID))
}

// TestHistorySeedIsConsistent seeds a tiny size and checks that what the
// reads use agrees with itself as production writes it: every event's
// stored rendering is byte for byte what events.Rendered.AppendJSON makes
// of its columns, message events belong to their payload's account and
// provider, DMARC totals agree between records, reports and daily rows,
// and every event has its delivery and the delivery its attempts.
func TestHistorySeedIsConsistent(t *testing.T) {
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	env := &benchEnv{Pool: pool}
	seed := &historySeed{Size: historySize{Name: "T", Factor: 0.002}, Now: time.Now().UTC().Truncate(time.Millisecond),
		Account: uuid.Must(uuid.NewV7())}
	_, err := dbsqlc.New().AccountInsert(ctx, pool, dbsqlc.AccountInsertParams{ID: seed.Account, Email: "h@example.com", PasswordHash: "x"})
	require.NoError(t, err)
	_, err = seedHistorySetup(ctx, env, seed)
	require.NoError(t, err)
	require.NoError(t, seedHistoryMessages(ctx, env, historyDays(seed.Now, 3000)))
	require.NoError(t, seedHistoryEvents(ctx, env, seed, historyDays(seed.Now, 500)))
	require.NoError(t, seedHistoryDMARC(ctx, env, seed))

	payloads := map[string][]byte{}
	for _, m := range benchEventMix {
		payloads[m.Type] = m.Payload
	}
	rows, err := pool.Query(ctx, `SELECT id, event_type, created_at, severity, domain, tags, rendered FROM events`)
	require.NoError(t, err)
	defer rows.Close() // a failed check must not hold the connection the pool's close waits for
	n := 0
	for rows.Next() {
		var r events.Rendered
		var stored string
		require.NoError(t, rows.Scan(&r.ID, &r.Type, &r.CreatedAt, &r.Severity, &r.Domain, &r.Tags, &stored))
		r.Payload = payloads[r.Type]
		require.Equal(t, string(r.AppendJSON(nil)), stored)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 500, n)

	count := func(sql string) int64 {
		var c int64
		require.NoError(t, pool.QueryRow(ctx, sql).Scan(&c))
		return c
	}
	require.Equal(t, int64(3000), count(`SELECT count(*) FROM message_events`))
	require.Zero(t, count(`SELECT count(*) FROM message_events m JOIN provider_payloads p ON p.id = m.payload_id
		WHERE p.account_id <> m.account_id OR p.provider_id <> m.provider_id`))
	require.Zero(t, count(`SELECT count(*) FROM message_events m JOIN domains d ON d.id = m.domain_id
		WHERE d.account_id <> m.account_id OR d.name <> m.domain`))
	require.Equal(t, count(`SELECT count(*) FROM message_events`), count(`SELECT sum(events) FROM provider_payloads`))
	require.Zero(t, count(`SELECT count(*) FROM dmarc_reports r WHERE message_count <> (SELECT sum(count) FROM dmarc_records WHERE report_id = r.id)`))
	require.Equal(t, count(`SELECT sum(count) FROM dmarc_records`), count(`SELECT sum(messages) FROM dmarc_source_days`))
	require.Equal(t, count(`SELECT sum(pass_count) FROM dmarc_reports`), count(`SELECT sum(compliant + forwarded) FROM dmarc_source_days`))
	require.Equal(t, count(`SELECT count(*) FROM events`), count(`SELECT count(*) FROM webhook_deliveries`))
	require.Equal(t, count(`SELECT sum(attempts) FROM webhook_deliveries`), count(`SELECT count(*) FROM webhook_delivery_attempts`))
}
