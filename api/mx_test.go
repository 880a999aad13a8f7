package api_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/domains"
)

// TestMXSetupStates walks an MX setup through every state against a
// loopback DNS server: pending, verified, lost (with its event), verified
// again, and failed after 72 hours without records.
func TestMXSetupStates(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	b := domainSetup(t, "", func(o *setupOpts) {
		o.now = now
		prev := o.deps
		o.deps = func(d *api.Deps) {
			if prev != nil {
				prev(d)
			}
			d.DNSFix = &domains.FixDeps{MX: dnsfix.MXConfig{Host: "mx.mailwatch.test"}}
		}
	})
	acct := b.createAccount(t)
	createDomain(t, b.testBundle, acct.Key, "mx-states.test")
	base := "/api/accounts/me/domains/mx-states.test"

	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"/mx-setup", acct.Key, nil).Status)
	resp := b.do(t, "POST", base+"/mx-setup", acct.Key, map[string]any{"subdomain": "evil.other.test."})
	require.Equal(t, http.StatusCreated, resp.Status, "a name outside is made relative: %s", resp.Body)
	resp = b.do(t, "POST", base+"/mx-setup", acct.Key, map[string]any{"subdomain": "bad_label"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)

	resp = b.do(t, "POST", base+"/mx-setup", acct.Key, map[string]any{"subdomain": "reports"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var setup api.MXSetup
	resp.JSON(t, &setup)
	require.Equal(t, "reports.mx-states.test", setup.Name)
	require.Equal(t, "pending", setup.State)
	require.Len(t, setup.Records, 2)
	require.Equal(t, dnsfix.MXRecord{Name: "reports.mx-states.test", Type: "MX", Value: "10 mx.mailwatch.test."}, setup.Records[0])
	require.Equal(t, "_mailwatch.reports.mx-states.test", setup.Records[1].Name)
	token := setup.Records[1].Value

	// Asking again keeps the token.
	resp = b.do(t, "POST", base+"/mx-setup", acct.Key, map[string]any{"subdomain": "reports.mx-states.test"})
	var again api.MXSetup
	resp.JSON(t, &again)
	require.Equal(t, token, again.Records[1].Value)

	verify := func() api.MXSetup {
		resp := b.do(t, "POST", base+"/mx-verify", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out api.MXSetup
		resp.JSON(t, &out)
		return out
	}
	got := verify()
	require.Equal(t, "pending", got.State)
	require.Len(t, got.Problems, 2)

	require.NoError(t, b.dns.Set("reports.mx-states.test. MX 10 mx.mailwatch.test.\n_mailwatch.reports.mx-states.test. TXT \""+token+"\"\n"))
	got = verify()
	require.Equal(t, "verified", got.State, "%v", got.Problems)
	require.Empty(t, got.Problems)
	require.NotNil(t, got.VerifiedAt)
	ok, err := dnsfix.IsVerifiedInbound(t.Context(), b.db, "Reports.mx-states.test.")
	require.NoError(t, err)
	require.True(t, ok, "the SMTP listener may accept it")

	// A foreign MX with a better preference appears: lost, with an alert.
	require.NoError(t, b.dns.Add("reports.mx-states.test. MX 5 mx.elsewhere.test.\n"))
	got = verify()
	require.Equal(t, "lost", got.State)
	require.Contains(t, strings.Join(got.Problems, "|"), "mx.elsewhere.test")
	lost := domainEvents(t, b.db, acct.ID, "mx_verification_lost")
	require.Len(t, lost, 1)
	require.Equal(t, "critical", lost[0].Severity)
	require.Equal(t, "reports.mx-states.test", lost[0].Payload["name"])
	ok, err = dnsfix.IsVerifiedInbound(t.Context(), b.db, "reports.mx-states.test")
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, b.dns.Set("reports.mx-states.test. MX 10 mx.mailwatch.test.\n"))
	require.Equal(t, "verified", verify().State)

	// Another subdomain starts over; nothing published for 72 h: failed.
	resp = b.do(t, "POST", base+"/mx-setup", acct.Key, map[string]any{"subdomain": "inbound"})
	require.Equal(t, http.StatusCreated, resp.Status)
	resp.JSON(t, &setup)
	require.Equal(t, "pending", setup.State)
	require.NotEqual(t, token, setup.Records[1].Value)
	mu.Lock()
	clock = clock.Add(73 * time.Hour)
	mu.Unlock()
	require.Equal(t, "failed", verify().State)

	// A DNS failure changes nothing: 503.
	b.dns.ServFail("inbound.mx-states.test.")
	require.Equal(t, http.StatusServiceUnavailable, b.do(t, "POST", base+"/mx-verify", acct.Key, nil).Status)

	other := b.createAccount(t)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", base+"/mx-verify", other.Key, nil).Status)
}
