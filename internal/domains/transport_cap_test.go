package domains

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// The health score is capped while an MX host fails its transport probe
// under an enforced MTA-STS policy, and not once the host passes.
func TestScoreCapsOnFailingEnforcedMX(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, tx, "capped.test")
	now := time.Now()
	pass := func() dnscheck.Result { return dnscheck.Result{Status: dnscheck.StatusPass, Records: []string{}} }
	rs := &dnscheck.Results{Domain: "capped.test",
		SPF: &dnscheck.SPFResult{Result: pass()}, DMARC: &dnscheck.DMARCResult{Result: pass()},
		MX:     &dnscheck.MXResult{Result: pass(), Hosts: []dnscheck.MXHost{{Host: "mx.capped.test", Preference: 10}}},
		MTASTS: &dnscheck.MTASTSResult{Result: pass(), Policy: &dnscheck.STSPolicy{Mode: "enforce", MaxAge: 604800, MX: []string{"mx.capped.test"}}},
	}
	em := &events.Emitter{}
	_, err := Apply(ctx, tx, em, d.ID, d.DkimSelectors, now, rs, now)
	require.NoError(t, err)
	row := func(verdict string) {
		_, err := tx.Exec(ctx, `DELETE FROM mx_probe_results WHERE domain_id = $1`, d.ID)
		require.NoError(t, err)
		require.NoError(t, dbsqlc.New().TransportInsert(ctx, tx, dbsqlc.TransportInsertParams{
			AccountID: d.AccountID, DomainID: d.ID, MxHost: "mx.capped.test", Address: "192.0.2.25", Port: 25,
			Verdict: verdict, HostVerdict: verdict, Problems: json.RawMessage(`[]`), ProbedAt: now,
		}))
	}

	row("tls_failing")
	rep, err := Score(ctx, tx, em, d.ID, now)
	require.NoError(t, err)
	require.NotNil(t, rep)
	var capped bool
	for _, c := range rep.Caps {
		capped = capped || c.Name == "mx_transport"
	}
	require.True(t, capped, "%+v", rep.Caps)
	require.LessOrEqual(t, rep.Score, 40)

	row("ok")
	rep, err = Score(ctx, tx, em, d.ID, now.Add(time.Minute))
	require.NoError(t, err)
	for _, c := range rep.Caps {
		require.NotEqual(t, "mx_transport", c.Name)
	}
}

// A testing MTA-STS policy whose MX passed its probe gets the manual
// "safe to enforce" recommendation; a failing probe takes it away.
func TestRecomputeFixesAdvisesEnforce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, tx, "enforce.test")
	now := time.Now()
	pass := dnscheck.Result{Status: dnscheck.StatusPass, Records: []string{}}
	rs := &dnscheck.Results{Domain: "enforce.test",
		MX: &dnscheck.MXResult{Result: pass, Hosts: []dnscheck.MXHost{{Host: "mx.enforce.test", Preference: 10}}},
		MTASTS: &dnscheck.MTASTSResult{Result: dnscheck.Result{Status: dnscheck.StatusWarn, Records: []string{"v=STSv1; id=1"}},
			Policy: &dnscheck.STSPolicy{Mode: "testing", MaxAge: 604800, MX: []string{"mx.enforce.test"}}},
	}
	_, err := Apply(ctx, tx, &events.Emitter{}, d.ID, d.DkimSelectors, now, rs, now)
	require.NoError(t, err)
	keys := func(verdict string, verified bool) []string {
		_, err := tx.Exec(ctx, `DELETE FROM mx_probe_results WHERE domain_id = $1`, d.ID)
		require.NoError(t, err)
		version, days, notAfter, yes := "TLS 1.3", int32(60), now.AddDate(0, 0, 60), true
		require.NoError(t, dbsqlc.New().TransportInsert(ctx, tx, dbsqlc.TransportInsertParams{
			AccountID: d.AccountID, DomainID: d.ID, MxHost: "mx.enforce.test", Address: "192.0.2.25", Port: 25,
			Verdict: verdict, HostVerdict: verdict, Problems: json.RawMessage(`[]`), Starttls: true, TlsVersion: &version,
			Verified: &verified, NameMatches: &yes, MatchesPolicy: &yes, DaysLeft: &days, NotAfter: &notAfter, ProbedAt: now,
		}))
		row, err := dbsqlc.New().DomainGetByID(ctx, tx, d.ID)
		require.NoError(t, err)
		require.NoError(t, RecomputeFixes(ctx, tx, nil, nil, row, now))
		recs, err := dbsqlc.New().DNSRecommendationListByDomain(ctx, tx, d.ID)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			out = append(out, r.Key)
		}
		return out
	}
	require.Contains(t, keys("ok", true), "mta_sts_enforce")
	require.NotContains(t, keys("tls_failing", false), "mta_sts_enforce")
}
