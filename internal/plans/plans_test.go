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
	require.Equal(t, []string{plans.Free, plans.Pro, plans.Business}, plans.Names())
	for i := 1; i < len(all); i++ {
		prev, p := all[i-1], all[i]
		require.Greater(t, p.Rank, prev.Rank)
		for _, l := range []string{plans.LimitDomains, plans.LimitReceivers, plans.LimitSubscriptions, plans.LimitProviders} {
			a, _ := prev.Limit(l)
			b, ok := p.Limit(l)
			require.True(t, ok)
			require.Greater(t, b, a, "%s: a bigger plan allows more %s", p.Name, l)
		}
		require.GreaterOrEqual(t, p.EventRetentionDays, prev.EventRetentionDays)
	}
	// Retention never drops below the webhook retry schedule's length (the
	// same floor EVENT_RETENTION_DAYS has).
	require.GreaterOrEqual(t, all[0].EventRetentionDays, 7)
	require.Equal(t, plans.Free, plans.Get("retired-plan").Name)
	biz, _ := plans.Lookup(plans.Business)
	require.Equal(t, 30, biz.RetentionDays(30), "EVENT_RETENTION_DAYS caps a plan")
	require.Equal(t, 90, biz.RetentionDays(365), "and never lengthens it")
}

func TestREADMEShowsTheTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), plans.MarkdownTable(), "README's plan table must be plans.MarkdownTable()")
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
