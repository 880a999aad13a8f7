package plans_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/plans"
)

func TestTable(t *testing.T) {
	all := plans.All()
	require.Equal(t, []string{plans.Free, plans.Pro, plans.Business, plans.Unlimited}, plans.Names())
	for i := 1; i < len(all); i++ {
		prev, p := all[i-1], all[i]
		require.Greater(t, p.Rank, prev.Rank)
		for _, l := range []string{plans.LimitDomains, plans.LimitReceivers, plans.LimitSubscriptions, plans.LimitProviders} {
			a, _, _ := prev.Limit(l)
			b, limited, ok := p.Limit(l)
			require.True(t, ok)
			if !limited {
				require.True(t, p.NoLimits, "%s: only a plan without limits is unlimited", p.Name)
				continue
			}
			require.Greater(t, b, a, "%s: a bigger plan allows more %s", p.Name, l)
		}
		if !p.NoLimits {
			require.GreaterOrEqual(t, p.EventRetentionDays, prev.EventRetentionDays)
		}
	}
	_, _, ok := all[0].Limit("widgets")
	require.False(t, ok)
	// Retention never drops below the webhook retry schedule's length (the
	// same floor EVENT_RETENTION_DAYS has).
	require.GreaterOrEqual(t, all[0].EventRetentionDays, 7)
	require.Equal(t, plans.Free, plans.Get("retired-plan").Name)
	biz, _ := plans.Lookup(plans.Business)
	require.Equal(t, 30, biz.RetentionDays(30), "EVENT_RETENTION_DAYS caps a plan")
	require.Equal(t, 90, biz.RetentionDays(365), "and never lengthens it")
	unl, _ := plans.Lookup(plans.Unlimited)
	require.Equal(t, 365, unl.RetentionDays(365), "unlimited keeps events as long as the server does")
}

func TestDefault(t *testing.T) {
	for _, c := range []struct {
		setting string
		billing bool
		want    string
	}{
		{"", false, plans.Unlimited}, // a team's own instance: no trial limits
		{"", true, plans.Free},       // plans are sold: accounts start free
		{"pro", false, plans.Pro},    // the operator's choice wins either way
		{" business ", true, plans.Business},
		{"unlimited", true, plans.Unlimited},
	} {
		got, err := plans.Default(c.setting, c.billing)
		require.NoError(t, err, c.setting)
		require.Equal(t, c.want, got, "setting %q billing %v", c.setting, c.billing)
	}
	_, err := plans.Default("gold", false)
	require.ErrorContains(t, err, `"gold" is not a plan`)

	pro := plans.Pro
	require.Equal(t, plans.Pro, plans.Effective(&pro, plans.Unlimited).Name, "a stored plan beats the default")
	require.Equal(t, plans.Unlimited, plans.Effective(nil, plans.Unlimited).Name)
	require.Equal(t, plans.Free, plans.Effective(nil, "").Name)
}

// TestDocsShowTheTable holds docs/features/plans.md's plan table to the code.
func TestDocsShowTheTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/features/plans.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), plans.MarkdownTable(), "docs/features/plans.md's plan table must be plans.MarkdownTable()")
}

func TestParsePriceMap(t *testing.T) {
	m, err := plans.ParsePriceMap(" price_abc=pro, price_def=business ,")
	require.NoError(t, err)
	require.Equal(t, plans.PriceMap{"price_abc": "pro", "price_def": "business"}, m)
	require.Equal(t, "price_abc=pro,price_def=business", m.String())
	m, err = plans.ParsePriceMap("")
	require.NoError(t, err)
	require.Empty(t, m)
	for _, bad := range []string{"price_abc", "price_abc=gold", "=pro", "price_a=pro,price_a=business"} {
		_, err := plans.ParsePriceMap(bad)
		require.Error(t, err, bad)
		require.True(t, strings.Contains(err.Error(), "price") || strings.Contains(err.Error(), "plan"), err.Error())
	}
}
