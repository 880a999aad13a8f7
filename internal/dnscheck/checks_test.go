package dnscheck

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// stsPolicies are the MTA-STS policies the test HTTPS server serves, by
// host.
func stsPolicies() map[string]string {
	return map[string]string{
		"mta-sts.good.test":          "version: STSv1\r\nmode: enforce\r\nmx: mx1.good.test\r\nmx: *.good.test\r\nmax_age: 1209600\r\n",
		"mta-sts.weak.test":          "version: STSv1\nmode: enforce\nmx: *.weak.test\nmx: gone.weak.test\nmax_age: 3600\n",
		"mta-sts.sts-testing.test":   "version: STSv1\nmode: testing\nmx: mx.sts-testing.test\nmax_age: 604800\n",
		"mta-sts.sts-uncovered.test": "version: STSv1\nmode: enforce\nmx: *.sts-uncovered.test\nmax_age: 604800\n",
		"mta-sts.sts-invalid.test":   "version: STSv1\nmode: strict\nmx: mx.example\nmax_age: 604800\n",
	}
}

type testBundle struct {
	srv      *dnstest.Server
	resolver *Client
	http     *http.Client
}

// setup starts the DNS server with testdata/checks.zone and an HTTPS server
// for MTA-STS policies whose certificate covers mta-sts.<test domains> except
// sts-badcert.test. The returned HTTP client sends every connection to that
// server and trusts its certificate.
func setup(t *testing.T) *testBundle {
	t.Helper()
	zone, err := os.ReadFile("testdata/checks.zone")
	require.NoError(t, err)
	srv := dnstest.Start(t, string(zone))
	srv.ServFail("servfail.test")
	srv.Drop("timeout.test")
	srv.Drop("mx.mxtimeout.test")
	srv.Authenticate("good.test")

	policies := stsPolicies()
	release := make(chan struct{})
	hts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		switch {
		case r.URL.Path != "/.well-known/mta-sts.txt":
			http.NotFound(w, r)
		case host == "mta-sts.sts-type.test":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("version: STSv1\nmode: enforce\nmx: *.example\nmax_age: 604800\n"))
		case host == "mta-sts.sts-redirect.test":
			http.Redirect(w, r, "https://mta-sts.good.test/.well-known/mta-sts.txt", http.StatusFound)
		case host == "mta-sts.sts-slow.test":
			// Never answers while the test runs: the check must give up
			// on its own context, whatever the machine's load.
			<-release
		case policies[host] != "":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(policies[host]))
		default:
			http.NotFound(w, r)
		}
	}))
	cert, pool := testCertificate(t, []string{
		"mta-sts.good.test", "mta-sts.weak.test", "mta-sts.sts-testing.test", "mta-sts.sts-uncovered.test",
		"mta-sts.sts-404.test", "mta-sts.sts-type.test", "mta-sts.sts-invalid.test", "mta-sts.sts-redirect.test",
		"mta-sts.sts-slow.test",
	})
	hts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	hts.Config.ErrorLog = log.New(io.Discard, "", 0)
	hts.StartTLS()
	t.Cleanup(hts.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for the slow handler
	addr := hts.Listener.Addr().String()
	httpClient := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
			TLSClientConfig: &tls.Config{RootCAs: pool},
		},
	}
	return &testBundle{srv: srv, resolver: NewClient(srv.Addr(), 100*time.Millisecond), http: httpClient}
}

func testCertificate(t *testing.T, names []string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mailwatch test"},
		DNSNames:              names,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	parsed, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(parsed)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// expect is the expected common result of a check: the status and a
// substring of each error and warning, in order.
type expect struct {
	status   string
	errors   []string
	warnings []string
}

func requireResult(t *testing.T, want expect, got Result) {
	t.Helper()
	require.Equal(t, want.status, got.Status, "errors: %q warnings: %q", got.Errors, got.Warnings)
	require.Len(t, got.Errors, len(want.errors), "errors: %q", got.Errors)
	for i, e := range want.errors {
		require.Contains(t, got.Errors[i], e)
	}
	require.Len(t, got.Warnings, len(want.warnings), "warnings: %q", got.Warnings)
	for i, w := range want.warnings {
		require.Contains(t, got.Warnings[i], w)
	}
	// finish was called: no nil slices.
	require.NotNil(t, got.Records)
	require.NotNil(t, got.Errors)
	require.NotNil(t, got.Warnings)
	require.NotNil(t, got.Instructions)
}

func TestCheckSPF(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for domain, want := range map[string]expect{
		"good.test":     {status: StatusPass},
		"weak.test":     {status: StatusWarn, warnings: []string{"?all"}},
		"empty.test":    {status: StatusNone, errors: []string{"no SPF record"}},
		"broken.test":   {status: StatusPermerror, errors: []string{"2 SPF records"}},
		"servfail.test": {status: StatusTemperror, errors: []string{"SERVFAIL"}},
		"timeout.test":  {status: StatusTemperror, errors: []string{"timeout"}},
	} {
		t.Run(domain, func(t *testing.T) {
			t.Parallel()
			res := CheckSPF(context.Background(), b.resolver, domain)
			requireResult(t, want, res.Result)
		})
	}
	res := CheckSPF(context.Background(), b.resolver, "good.test")
	require.Equal(t, "fail", res.Default)
	require.Equal(t, 1, res.Lookups)
	require.Len(t, res.Trace, 3)
}

func TestCheckDMARC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for domain, want := range map[string]expect{
		"good.test":     {status: StatusPass},
		"weak.test":     {status: StatusWarn, warnings: []string{"policy is none", "no rua"}},
		"empty.test":    {status: StatusNone, errors: []string{"no DMARC record"}},
		"broken.test":   {status: StatusPermerror, errors: []string{"tag p"}},
		"servfail.test": {status: StatusTemperror, errors: []string{"SERVFAIL"}},
		"timeout.test":  {status: StatusTemperror, errors: []string{"timeout"}},
	} {
		t.Run(domain, func(t *testing.T) {
			t.Parallel()
			res := CheckDMARC(context.Background(), b.resolver, domain, "")
			requireResult(t, want, res.Result)
		})
	}
	res := CheckDMARC(context.Background(), b.resolver, "good.test", "")
	require.Equal(t, "reject", res.Policy)
	require.Equal(t, "good.test", res.RecordDomain)
}

func TestCheckDKIM(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name      string
		domain    string
		selectors []string
		probe     bool
		want      expect
		found     map[string]string // selector -> status
	}{
		{name: "ConfiguredAndProbed", domain: "good.test", selectors: []string{"selector1"}, probe: true,
			want: expect{status: StatusPass}, found: map[string]string{"selector1": StatusPass, "google": StatusPass}},
		{name: "ProbeOnly", domain: "good.test", probe: true,
			want: expect{status: StatusPass}, found: map[string]string{"selector1": StatusPass, "google": StatusPass}},
		{name: "WeakKeys", domain: "weak.test", selectors: []string{"old"}, probe: true,
			want:  expect{status: StatusWarn, warnings: []string{"1024-bit", "testing mode", "revoked"}},
			found: map[string]string{"s1": StatusWarn, "s2": StatusWarn, "old": StatusFail}},
		{name: "OnlyRevokedAndShort", domain: "broken.test", selectors: []string{"revoked", "short"},
			want:  expect{status: StatusFail, errors: []string{"revoked", "512 bits"}},
			found: map[string]string{"revoked": StatusFail, "short": StatusFail}},
		{name: "Malformed", domain: "malformed.test", selectors: []string{"bad"},
			want: expect{status: StatusPermerror, errors: []string{"not an RSA public key"}}, found: map[string]string{"bad": StatusPermerror}},
		{name: "UnknownSelectorIsNeutral", domain: "empty.test", selectors: []string{"nosuch"}, probe: true,
			want: expect{status: StatusNeutral, warnings: []string{"configured selector \"nosuch\" has no key"}}, found: map[string]string{"nosuch": StatusNone}},
		{name: "NothingFound", domain: "empty.test", probe: true, want: expect{status: StatusNeutral}, found: map[string]string{}},
		{name: "Servfail", domain: "servfail.test", selectors: []string{"selector1"}, probe: true,
			want:  expect{status: StatusTemperror, errors: []string{"SERVFAIL", "11 selector probes failed"}},
			found: map[string]string{"selector1": StatusTemperror}},
		{name: "Timeout", domain: "timeout.test", selectors: []string{"selector1"},
			want: expect{status: StatusTemperror, errors: []string{"timeout"}}, found: map[string]string{"selector1": StatusTemperror}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := CheckDKIM(context.Background(), b.resolver, tc.domain, tc.selectors, tc.probe)
			requireResult(t, tc.want, res.Result)
			got := map[string]string{}
			for _, s := range res.Selectors {
				got[s.Selector] = s.Status
			}
			require.Equal(t, tc.found, got)
		})
	}

	res := CheckDKIM(context.Background(), b.resolver, "good.test", []string{"selector1"}, true)
	keys := map[string]DKIMKey{}
	for _, s := range res.Selectors {
		keys[s.Selector] = *s.Key
	}
	require.Equal(t, DKIMKey{KeyType: "rsa", Bits: 2048}, keys["selector1"])
	require.Equal(t, DKIMKey{KeyType: "ed25519", Bits: 256}, keys["google"])
	require.Equal(t, "configured", res.Selectors[0].Source)
}

func TestCheckMX(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for domain, want := range map[string]expect{
		"good.test":      {status: StatusPass},
		"weak.test":      {status: StatusWarn, warnings: []string{"alias", "gone.weak.test: the MX target has no A or AAAA"}},
		"broken.test":    {status: StatusFail, errors: []string{"nowhere.broken.test: the MX target has no A or AAAA", "192.0.2.25: the MX target is an IP address"}},
		"nullmx.test":    {status: StatusNeutral, warnings: []string{"null MX"}},
		"malformed.test": {status: StatusPermerror, errors: []string{"null MX must be the only"}},
		"empty.test":     {status: StatusNone, errors: []string{"no MX records"}},
		"servfail.test":  {status: StatusTemperror, errors: []string{"SERVFAIL"}},
		"timeout.test":   {status: StatusTemperror, errors: []string{"timeout"}},
		"mxtimeout.test": {status: StatusTemperror, errors: []string{"temporary failure"}},
	} {
		t.Run(domain, func(t *testing.T) {
			t.Parallel()
			res := CheckMX(context.Background(), b.resolver, domain)
			requireResult(t, want, res.Result)
		})
	}
	res := CheckMX(context.Background(), b.resolver, "weak.test")
	require.Equal(t, []string{"10 mx.weak.test", "20 alias.weak.test", "30 gone.weak.test"}, res.Records)
	require.Equal(t, "mx.weak.test", res.Hosts[1].CNAME)
	require.Equal(t, []string{"192.0.2.1"}, res.Hosts[1].Addresses)
	res = CheckMX(context.Background(), b.resolver, "nullmx.test")
	require.True(t, res.NullMX)
}

func TestCheckMTASTS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for domain, want := range map[string]expect{
		"good.test":          {status: StatusPass},
		"weak.test":          {status: StatusWarn, warnings: []string{"max_age is 3600"}},
		"sts-testing.test":   {status: StatusWarn, warnings: []string{"mode is testing"}},
		"sts-uncovered.test": {status: StatusFail, errors: []string{"do not cover MX host(s) backup.other.test"}},
		"sts-404.test":       {status: StatusFail, errors: []string{"HTTP 404"}},
		"sts-type.test":      {status: StatusFail, errors: []string{"text/plain"}},
		"sts-invalid.test":   {status: StatusFail, errors: []string{"mode must be"}},
		"sts-redirect.test":  {status: StatusFail, errors: []string{"HTTP 302"}},
		"sts-badcert.test":   {status: StatusFail, errors: []string{"certificate"}},
		"broken.test":        {status: StatusPermerror, errors: []string{"2 MTA-STS records"}},
		"malformed.test":     {status: StatusPermerror, errors: []string{"id must be"}},
		"empty.test":         {status: StatusNone, errors: []string{"no MTA-STS record"}},
		"servfail.test":      {status: StatusTemperror, errors: []string{"SERVFAIL"}},
		"timeout.test":       {status: StatusTemperror, errors: []string{"timeout"}},
	} {
		t.Run(domain, func(t *testing.T) {
			t.Parallel()
			res := CheckMTASTS(context.Background(), b.resolver, b.http, domain)
			requireResult(t, want, res.Result)
		})
	}

	t.Run("SlowPolicyIsTemperror", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		res := CheckMTASTS(ctx, b.resolver, b.http, "sts-slow.test")
		require.Equal(t, StatusTemperror, res.Status, "errors: %q", res.Errors)
	})

	res := CheckMTASTS(context.Background(), b.resolver, b.http, "good.test")
	require.Equal(t, "20240101T000000", res.ID)
	require.Equal(t, &STSPolicy{Mode: "enforce", MaxAge: 1209600, MX: []string{"mx1.good.test", "*.good.test"}}, res.Policy)
	require.Contains(t, res.Records, "policy: mode: enforce")
}

func TestCheckTLSRPT(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for domain, want := range map[string]expect{
		"good.test":      {status: StatusPass},
		"broken.test":    {status: StatusPermerror, errors: []string{"mailto: or https:"}},
		"malformed.test": {status: StatusPermerror, errors: []string{"rua field is missing"}},
		"empty.test":     {status: StatusNone, errors: []string{"no TLS-RPT record"}},
		"servfail.test":  {status: StatusTemperror, errors: []string{"SERVFAIL"}},
		"timeout.test":   {status: StatusTemperror, errors: []string{"timeout"}},
	} {
		t.Run(domain, func(t *testing.T) {
			t.Parallel()
			res := CheckTLSRPT(context.Background(), b.resolver, domain)
			requireResult(t, want, res.Result)
		})
	}
	res := CheckTLSRPT(context.Background(), b.resolver, "good.test")
	require.Equal(t, []string{"mailto:tls@good.test", "https://reports.good.test/tls"}, res.RUA)
}

func TestCheckBIMI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for domain, want := range map[string]expect{
		"good.test":      {status: StatusPass},
		"weak.test":      {status: StatusWarn, warnings: []string{"does not end in .svg", "no a= mark certificate"}},
		"broken.test":    {status: StatusPermerror, errors: []string{"https:// URL"}},
		"malformed.test": {status: StatusPermerror, errors: []string{"l field"}},
		"empty.test":     {status: StatusNone, errors: []string{"no BIMI record"}},
		"servfail.test":  {status: StatusTemperror, errors: []string{"SERVFAIL"}},
		"timeout.test":   {status: StatusTemperror, errors: []string{"timeout"}},
	} {
		t.Run(domain, func(t *testing.T) {
			t.Parallel()
			res := CheckBIMI(context.Background(), b.resolver, domain)
			requireResult(t, want, res.Result)
		})
	}
}

func TestCheckDNSSEC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for domain, want := range map[string]expect{
		"good.test":     {status: StatusPass},
		"weak.test":     {status: StatusWarn, warnings: []string{"DS records but the resolver did not validate"}},
		"empty.test":    {status: StatusNone, errors: []string{"not signed"}},
		"nxdomain.test": {status: StatusNone, errors: []string{"does not appear to exist"}},
		"servfail.test": {status: StatusTemperror, errors: []string{"SERVFAIL"}},
		"timeout.test":  {status: StatusTemperror, errors: []string{"timeout"}},
	} {
		t.Run(domain, func(t *testing.T) {
			t.Parallel()
			res := CheckDNSSEC(context.Background(), b.resolver, domain)
			requireResult(t, want, res.Result)
		})
	}
	// A subdomain without SOA is judged by its organizational domain.
	res := CheckDNSSEC(context.Background(), b.resolver, "mx1.good.test")
	require.Equal(t, StatusPass, res.Status)
	require.Equal(t, "good.test", res.Zone)
}

func TestCheckAll(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("Good", func(t *testing.T) {
		t.Parallel()
		rs := CheckAll(context.Background(), "good.test", Options{Resolver: b.resolver, HTTPClient: b.http, DKIMSelectors: []string{"selector1"}})
		m := rs.Map()
		require.Len(t, m, len(Names()))
		for name, r := range m {
			require.Equal(t, StatusPass, r.Status, "%s: %q %q", name, r.Errors, r.Warnings)
		}
	})

	t.Run("BIMIRequiresDMARCEnforcement", func(t *testing.T) {
		t.Parallel()
		rs := CheckAll(context.Background(), "weak.test", Options{Resolver: b.resolver, HTTPClient: b.http})
		require.Contains(t, strings.Join(rs.BIMI.Warnings, "\n"), "only shown when DMARC is at p=quarantine or p=reject")
	})

	t.Run("TimeoutIsTemperrorNotMissing", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		rs := CheckAll(context.Background(), "timeout.test", Options{Resolver: b.resolver, HTTPClient: b.http, CheckTimeout: 200 * time.Millisecond})
		// Not a speed limit: the budget (200 ms) must cut the checks short
		// rather than let them run into the resolver's own timeouts and
		// retries; the margin is wide so a loaded machine cannot fail it.
		require.Less(t, time.Since(start), 10*time.Second)
		for name, r := range rs.Map() {
			require.Equal(t, StatusTemperror, r.Status, "%s: %q", name, r.Errors)
		}
	})

	t.Run("ServfailIsTemperror", func(t *testing.T) {
		t.Parallel()
		rs := CheckAll(context.Background(), "servfail.test", Options{Resolver: b.resolver, HTTPClient: b.http, DKIMSelectors: []string{"selector1"}})
		for name, r := range rs.Map() {
			require.Equal(t, StatusTemperror, r.Status, "%s: %q", name, r.Errors)
		}
	})

	t.Run("NXDOMAINSaysTheDomainDoesNotExist", func(t *testing.T) {
		t.Parallel()
		rs := CheckAll(context.Background(), "nosuch.test", Options{Resolver: b.resolver, HTTPClient: b.http, DKIMSelectors: []string{"selector1"}})
		require.True(t, rs.NXDomain)
		m := rs.Map()
		require.Len(t, m, len(Names()))
		for name, r := range m {
			require.Equal(t, StatusNone, r.Status, name)
			require.Equal(t, []string{"the domain nosuch.test does not exist in DNS (the resolver answered NXDOMAIN), so it has no records at all"}, r.Errors, name)
			require.Empty(t, r.Records, name)
			require.Len(t, r.Instructions, 1, name)
		}
		// A domain that exists but publishes nothing is not NXDOMAIN: its
		// checks keep their own findings.
		rs = CheckAll(context.Background(), "empty.test", Options{Resolver: b.resolver, HTTPClient: b.http})
		require.False(t, rs.NXDomain)
		require.Equal(t, []string{"no SPF record at empty.test"}, rs.SPF.Errors)
		require.Equal(t, StatusNeutral, rs.DKIM.Status)
		// A temporary failure says nothing about existence.
		rs = CheckAll(context.Background(), "servfail.test", Options{Resolver: b.resolver, HTTPClient: b.http})
		require.False(t, rs.NXDomain)
	})

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		rs := CheckAll(context.Background(), "empty.test", Options{Resolver: b.resolver, HTTPClient: b.http})
		data, err := json.Marshal(rs)
		require.NoError(t, err)
		var generic map[string]map[string]any
		var top map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(data, &top))
		for _, name := range Names() {
			require.Contains(t, top, name)
		}
		delete(top, "domain")
		require.Equal(t, "false", string(top["nxdomain"]))
		delete(top, "nxdomain")
		raw, err := json.Marshal(top)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &generic))
		for name, check := range generic {
			for _, key := range []string{"status", "records", "errors", "warnings", "instructions"} {
				require.Contains(t, check, key, name)
			}
			require.NotNil(t, check["records"], name)
		}
	})

	t.Run("ChangeDetection", func(t *testing.T) {
		t.Parallel()
		zone, err := os.ReadFile("testdata/checks.zone")
		require.NoError(t, err)
		srv := dnstest.Start(t, strings.ReplaceAll(string(zone), "good.test.", "change.test."))
		opts := Options{Resolver: NewClient(srv.Addr(), 100*time.Millisecond), HTTPClient: b.http, SkipSelectorProbe: true}
		before := CheckAll(context.Background(), "change.test", opts).Map()

		require.NoError(t, srv.Set(`change.test. TXT "v=spf1 ip4:192.0.2.0/24 ~all"`))
		srv.Remove("_dmarc.change.test", 16)
		after := CheckAll(context.Background(), "change.test", opts).Map()

		changes := Compare(before, after)
		require.Len(t, changes, 3)
		require.Equal(t, NameSPF, changes[0].Check)
		require.False(t, changes[0].Critical)
		require.Equal(t, []string{"v=spf1 ip4:192.0.2.0/24 ~all"}, changes[0].After.Records)
		require.Equal(t, NameDMARC, changes[1].Check)
		require.True(t, changes[1].Critical)
		require.Equal(t, StatusNone, changes[1].After.Status)
		// BIMI's record is the same, but without DMARC enforcement its
		// status dropped to warn.
		require.Equal(t, NameBIMI, changes[2].Check)
		require.Equal(t, StatusWarn, changes[2].After.Status)
		require.False(t, changes[2].Critical)
	})
}

func TestCompare(t *testing.T) {
	t.Parallel()
	pass := Result{Status: StatusPass, Records: []string{"a", "b"}}
	for _, tc := range []struct {
		name     string
		before   map[string]Result
		after    map[string]Result
		changes  int
		critical bool
	}{
		{"Same", map[string]Result{NameSPF: pass}, map[string]Result{NameSPF: {Status: StatusPass, Records: []string{"b", "a"}}}, 0, false},
		{"RecordChanged", map[string]Result{NameSPF: pass}, map[string]Result{NameSPF: {Status: StatusPass, Records: []string{"c"}}}, 1, false},
		{"PassToFail", map[string]Result{NameMX: pass}, map[string]Result{NameMX: {Status: StatusFail, Records: []string{"a", "b"}}}, 1, true},
		{"WarnToMissing", map[string]Result{NameDMARC: {Status: StatusWarn}}, map[string]Result{NameDMARC: {Status: StatusNone}}, 1, true},
		{"PassToPermerror", map[string]Result{NameSPF: pass}, map[string]Result{NameSPF: {Status: StatusPermerror, Records: []string{"a", "b"}}}, 1, true},
		{"TemperrorIgnored", map[string]Result{NameSPF: pass}, map[string]Result{NameSPF: {Status: StatusTemperror}}, 0, false},
		{"FromTemperrorIgnored", map[string]Result{NameSPF: {Status: StatusTemperror}}, map[string]Result{NameSPF: {Status: StatusNone}}, 0, false},
		{"NoneToPass", map[string]Result{NameBIMI: {Status: StatusNone}}, map[string]Result{NameBIMI: pass}, 1, false},
		{"NewCheck", map[string]Result{}, map[string]Result{NameBIMI: pass}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			changes := Compare(tc.before, tc.after)
			require.Len(t, changes, tc.changes)
			if tc.changes > 0 {
				require.Equal(t, tc.critical, changes[0].Critical)
			}
		})
	}
}
