package transport_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/mxprobe"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/internal/transport"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const zone = `
mx.good.test.     A 127.0.0.1
mx.flip.test.     A 127.0.0.1
mx.wrong.test.    A 127.0.0.1
mx.soon.test.     A 127.0.0.1
mx.dane.test.     A 127.0.0.1
mx.temp.test.     A 127.0.0.1
1.0.0.127.in-addr.arpa. PTR mx.good.test.
`

func startDNS(t *testing.T) (*dnstest.Server, dnscheck.Resolver) {
	srv := dnstest.Start(t, zone)
	return srv, dnscheck.NewClient(srv.Addr(), 2*time.Second)
}

func payload(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

// A valid certificate is stored as ok with its TLS facts and raises
// nothing; the same host then presenting an expired certificate raises one
// critical mx_tls_failing (MTA-STS enforce), not again on the next probe,
// and caps the health score.
func TestProbeStoresAndRaisesTLSFailingOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	clk := &clock{now: testNow}
	db := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, db, "flip.test")
	d = storeResults(t, db, d.ID, "enforce", "mx.flip.test")

	port, rec := startSMTP(t, pki.leaf(t, []string{"mx.flip.test"}, testNow.AddDate(0, 3, 0)))
	out, err := newService(t, r, port, pki, clk, loopbackGuard).ProbeDomain(ctx, db, d.ID)
	require.NoError(t, err)
	require.Equal(t, mxprobe.VerdictOK, out.Results[0].Verdict, "%+v", out.Results[0].Problems)
	require.Empty(t, out.Events)
	rows := storedRows(t, db, d.AccountID, d.ID)
	require.Len(t, rows, 1)
	row := rows[0]
	require.Equal(t, "mx.flip.test", row.MxHost)
	require.Equal(t, "127.0.0.1", row.Address)
	require.Equal(t, "ok", row.Verdict)
	require.True(t, row.Starttls)
	require.True(t, *row.Verified)
	require.True(t, *row.NameMatches)
	require.Equal(t, int32(92), *row.DaysLeft)
	require.NotEmpty(t, *row.Fingerprint)
	require.NotEmpty(t, *row.TlsVersion)
	require.True(t, row.Fcrdns, "127.0.0.1's PTR names mx.good.test, which resolves back to it")
	require.Equal(t, "mx.good.test", row.Ptr)
	_, capped, err := transport.HealthCap(ctx, db, &d)
	require.NoError(t, err)
	require.False(t, capped)

	expired, _ := startSMTP(t, pki.leaf(t, []string{"mx.flip.test"}, testNow.AddDate(0, 0, -2)))
	svc := newService(t, r, expired, pki, clk, loopbackGuard)
	for range 2 {
		out, err = svc.ProbeDomain(ctx, db, d.ID)
		require.NoError(t, err)
		require.Equal(t, mxprobe.VerdictTLSFailing, out.Results[0].Verdict)
	}
	got := eventsOf(t, db, d.AccountID, events.TypeMXTLSFailing)
	require.Len(t, got, 1, "one event per transition")
	require.Equal(t, "critical", got[0].Severity, "MTA-STS enforce makes it critical")
	p := payload(t, got[0].Payload)
	require.Equal(t, "tls_failing", p["verdict"])
	require.Contains(t, p["problems"], "certificate_expired")
	require.Equal(t, "enforce", p["mta_sts_mode"])
	c, capped, err := transport.HealthCap(ctx, db, &d)
	require.NoError(t, err)
	require.True(t, capped)
	require.Equal(t, "mx_transport", c.Name)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Zero(t, rec.mails+rec.rcpt, "a probe never sends MAIL FROM or RCPT TO")
}

// Without MTA-STS enforce or DANE, a wrongly named certificate is a
// warning, and the health score is not capped.
func TestWrongNameIsAWarning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	db := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, db, "wrong.test")
	d = storeResults(t, db, d.ID, "testing", "mx.wrong.test")
	port, _ := startSMTP(t, pki.leaf(t, []string{"mail.elsewhere.test"}, testNow.AddDate(0, 3, 0)))
	_, err := newService(t, r, port, pki, &clock{now: testNow}, loopbackGuard).ProbeDomain(ctx, db, d.ID)
	require.NoError(t, err)
	got := eventsOf(t, db, d.AccountID, events.TypeMXTLSFailing)
	require.Len(t, got, 1)
	require.Equal(t, "warning", got[0].Severity)
	require.Contains(t, payload(t, got[0].Payload)["problems"], "name_mismatch")
	_, capped, err := transport.HealthCap(ctx, db, &d)
	require.NoError(t, err)
	require.False(t, capped)
	v, err := transport.Load(ctx, db, d, testNow)
	require.NoError(t, err)
	require.False(t, v.SafeToEnforce)
	require.NotEmpty(t, v.Reasons)
}

// A testing-mode policy whose every MX passes a verified, matching
// handshake is safe to enforce; TLS-RPT failures are counted per MX host.
func TestSafeToEnforceAndTLSRPTFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	db := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, db, "good.test")
	d = storeResults(t, db, d.ID, "testing", "mx.good.test")
	port, _ := startSMTP(t, pki.leaf(t, []string{"mx.good.test"}, testNow.AddDate(0, 3, 0)))
	_, err := newService(t, r, port, pki, &clock{now: testNow}, loopbackGuard).ProbeDomain(ctx, db, d.ID)
	require.NoError(t, err)
	v, err := transport.Load(ctx, db, d, testNow)
	require.NoError(t, err)
	require.True(t, v.SafeToEnforce, "%v", v.Reasons)
	require.Len(t, v.Hosts, 1)
	require.Equal(t, "ok", v.Hosts[0].Verdict)
	require.Zero(t, v.Hosts[0].TLSRPTFailures)

	// TLS reports' failures naming the host (any case, trailing dot) are
	// joined to it; another host's and a report older than the window are not.
	for i, rep := range []struct {
		begin    time.Time
		policies string
	}{
		{testNow.AddDate(0, 0, -3), `[{"policy":{"policy-type":"sts","policy-domain":"good.test"},"summary":{"total-successful-session-count":10,"total-failure-session-count":9},
			"failure-details":[{"result-type":"certificate-expired","receiving-mx-hostname":"MX.good.test.","failed-session-count":7},
			{"result-type":"starttls-not-supported","receiving-mx-hostname":"mx.other.test","failed-session-count":2}]}]`},
		{testNow.AddDate(0, 0, -1), `[{"policy":{"policy-type":"sts","policy-domain":"good.test"},"summary":{"total-successful-session-count":1,"total-failure-session-count":3},
			"failure-details":[{"result-type":"validation-failure","receiving-mx-hostname":"mx.good.test","failed-session-count":3}]}]`},
		{testNow.AddDate(0, 0, -45), `[{"policy":{"policy-type":"sts","policy-domain":"good.test"},"summary":{"total-successful-session-count":0,"total-failure-session-count":100},
			"failure-details":[{"result-type":"validation-failure","receiving-mx-hostname":"mx.good.test","failed-session-count":100}]}]`},
	} {
		_, err := db.Exec(ctx, `WITH m AS (INSERT INTO report_messages (id, account_id, domain_id, kind, source, raw_size)
			VALUES (gen_random_uuid(), $1, $2, 'tlsrpt', 'upload', 1) RETURNING id)
			INSERT INTO tls_reports (id, domain_id, message_id, org_name, report_id, contact_info, begin_at, end_at, successful_count, failure_count, policies)
			SELECT gen_random_uuid(), $2, m.id, 'Example', $3, '', $4, $4::timestamptz + interval '1 day', 0, 0, $5 FROM m`,
			d.AccountID, d.ID, itoa(i), rep.begin, rep.policies)
		require.NoError(t, err)
	}
	v, err = transport.Load(ctx, db, d, testNow)
	require.NoError(t, err)
	require.Equal(t, int64(10), v.Hosts[0].TLSRPTFailures)
}

// certificate_expiring fires once per threshold per certificate on a
// fixed clock: 30 and 14 days as warnings, 7 as critical, and never twice.
func TestCertificateExpiringOncePerThreshold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	db := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, db, "soon.test")
	d = storeResults(t, db, d.ID, "", "mx.soon.test")
	notAfter := testNow.Add(20*24*time.Hour + time.Hour)
	port, _ := startSMTP(t, pki.leaf(t, []string{"mx.soon.test"}, notAfter))
	clk := &clock{now: testNow}
	svc := newService(t, r, port, pki, clk, loopbackGuard)
	for _, days := range []int{0, 0, 1, 7, 7, 15, 16} { // 20, 20, 19, 13, 13, 5, 4 days left
		clk.Set(testNow.AddDate(0, 0, days))
		_, err := svc.ProbeDomain(ctx, db, d.ID)
		require.NoError(t, err)
	}
	got := eventsOf(t, db, d.AccountID, events.TypeCertificateExpiring)
	require.Len(t, got, 3)
	var thresholds, left []float64
	var sev []string
	for _, e := range got {
		p := payload(t, e.Payload)
		thresholds = append(thresholds, p["threshold"].(float64))
		left = append(left, p["days_left"].(float64))
		sev = append(sev, e.Severity)
	}
	require.Equal(t, []float64{30, 14, 7}, thresholds)
	require.Equal(t, []float64{20, 13, 5}, left)
	require.Equal(t, []string{"warning", "warning", "critical"}, sev)
	require.Empty(t, eventsOf(t, db, d.AccountID, events.TypeMXTLSFailing), "a valid certificate expiring soon still passes")
}

// A matching TLSA record under an AD answer is stored as matched; a wrong
// hash then raises one dane_mismatch and a critical mx_tls_failing.
func TestDANEMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, r := startDNS(t)
	srv.Authenticate("dane.test")
	pki := newTestPKI(t)
	db := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, db, "dane.test")
	d = storeResults(t, db, d.ID, "", "mx.dane.test")
	cert := pki.leaf(t, []string{"mx.dane.test"}, testNow.AddDate(0, 3, 0))
	port, _ := startSMTP(t, cert)
	name := "_" + itoa(port) + "._tcp.mx.dane.test."
	require.NoError(t, srv.Add(name+" TLSA 3 1 1 "+spkiSHA256(cert.Leaf)))
	svc := newService(t, r, port, pki, &clock{now: testNow}, loopbackGuard)
	_, err := svc.ProbeDomain(ctx, db, d.ID)
	require.NoError(t, err)
	rows := storedRows(t, db, d.AccountID, d.ID)
	require.Equal(t, "matched", rows[0].DaneStatus)
	require.Empty(t, eventsOf(t, db, d.AccountID, events.TypeDANEMismatch))

	srv.Remove(name, dns.TypeTLSA)
	require.NoError(t, srv.Add(name+" TLSA 3 1 1 "+spkiSHA256(pki.cert)))
	for range 2 {
		_, err = svc.ProbeDomain(ctx, db, d.ID)
		require.NoError(t, err)
	}
	got := eventsOf(t, db, d.AccountID, events.TypeDANEMismatch)
	require.Len(t, got, 1)
	require.Equal(t, "critical", got[0].Severity)
	require.Equal(t, []any{"127.0.0.1"}, payload(t, got[0].Payload)["addresses"])
	failing := eventsOf(t, db, d.AccountID, events.TypeMXTLSFailing)
	require.Len(t, failing, 1)
	require.Equal(t, "critical", failing[0].Severity, "DANE published makes it critical")
	require.Equal(t, "mismatch", storedRows(t, db, d.AccountID, d.ID)[0].DaneStatus)
}

// A Temporary probe (a closed port; an address the guard refuses) changes
// no stored row and raises nothing.
func TestTemporaryChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	db := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, db, "temp.test")
	d = storeResults(t, db, d.ID, "enforce", "mx.temp.test")
	port, _ := startSMTP(t, pki.leaf(t, []string{"mx.temp.test"}, testNow.AddDate(0, 3, 0)))
	clk := &clock{now: testNow}
	// AfterStore (the workers queue the health recompute there) runs in
	// the transaction that stored results, and only then.
	var hooked []uuid.UUID
	hook := func(ctx context.Context, tx pgx.Tx, domainID uuid.UUID) error {
		require.Len(t, storedRows(t, tx, d.AccountID, domainID), 1, "the hook sees the stored rows")
		hooked = append(hooked, domainID)
		return nil
	}
	svc := newService(t, r, port, pki, clk, loopbackGuard)
	svc.AfterStore = hook
	_, err := svc.ProbeDomain(ctx, db, d.ID)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{d.ID}, hooked)
	before := storedRows(t, db, d.AccountID, d.ID)
	require.Len(t, before, 1)

	clk.Set(testNow.Add(time.Hour))
	for _, svc := range []*transport.Service{
		newService(t, r, closedPort(t), pki, clk, loopbackGuard),
		newService(t, r, port, pki, clk, netguard.NewGuard(nil)),
	} {
		svc.AfterStore = hook
		out, err := svc.ProbeDomain(ctx, db, d.ID)
		require.NoError(t, err)
		require.Equal(t, mxprobe.VerdictTemporary, out.Results[0].Verdict)
		require.Zero(t, out.Stored)
		require.Equal(t, before, storedRows(t, db, d.AccountID, d.ID))
	}
	require.Empty(t, eventsOf(t, db, d.AccountID, events.TypeMXTLSFailing))
	require.Len(t, hooked, 1, "nothing stored, nothing to recompute")
}

// Two probes of one never-probed domain at once store one set of rows and
// raise one mx_tls_failing: the domain's row lock serialises them.
func TestConcurrentProbesRaiseOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	pool, _ := dbtest.NewDB(t)
	d := testfactory.AccountDomain(t, pool, "wrong.test")
	d = storeResults(t, pool, d.ID, "", "mx.wrong.test")
	port, _ := startSMTP(t, pki.leaf(t, []string{"mail.elsewhere.test"}, testNow.AddDate(0, 3, 0)))
	svc := newService(t, r, port, pki, &clock{now: testNow}, loopbackGuard)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := svc.ProbeDomain(ctx, pool, d.ID)
			errs <- err
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.Len(t, eventsOf(t, pool, d.AccountID, events.TypeMXTLSFailing), 1)
	require.Len(t, storedRows(t, pool, d.AccountID, d.ID), 1)
}

// A host outside the MTA-STS policy's mx patterns fails on a host-level
// problem, which its stored address rows carry.
func TestHostLevelProblemIsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r := startDNS(t)
	pki := newTestPKI(t)
	db := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, db, "good.test")
	d = storeResults(t, db, d.ID, "", "mx.good.test")
	// The stored policy names another host only.
	_, err := db.Exec(ctx, `UPDATE domains SET results = jsonb_set(results, '{mta_sts}',
		'{"status":"pass","records":[],"errors":[],"warnings":[],"instructions":[],"policy":{"mode":"enforce","max_age":604800,"mx":["mx.other.test"]}}')
		WHERE id = $1`, d.ID)
	require.NoError(t, err)
	port, _ := startSMTP(t, pki.leaf(t, []string{"mx.good.test"}, testNow.AddDate(0, 3, 0)))
	out, err := newService(t, r, port, pki, &clock{now: testNow}, loopbackGuard).ProbeDomain(ctx, db, d.ID)
	require.NoError(t, err)
	require.Equal(t, mxprobe.VerdictTLSFailing, out.Results[0].Verdict, "%+v", out.Results[0].Problems)
	rows := storedRows(t, db, d.AccountID, d.ID)
	require.Len(t, rows, 1)
	require.Contains(t, string(rows[0].Problems), `"policy_mismatch"`)
	require.False(t, *rows[0].MatchesPolicy)
}
