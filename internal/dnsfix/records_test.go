package dnsfix_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnsfix"
)

// TestMergeRUA is the one rua merge (the DNS recommendation and the
// reporting-address instructions): destinations stay as written, ours is
// appended once.
func TestMergeRUA(t *testing.T) {
	t.Parallel()
	old := func(a string) bool { return a == "dmarc+old@mw.test" || a == "r@mw.test" }
	for _, tc := range []struct {
		name, rua    string
		ours         func(string) bool
		want         string
		namesAlready bool
	}{
		{name: "None", rua: "", want: "mailto:r@mw.test"},
		{name: "Blank", rua: "  ", want: "mailto:r@mw.test"},
		{name: "Appended", rua: "mailto:a@example.com", want: "mailto:a@example.com,mailto:r@mw.test"},
		{name: "SizeLimitAndSpacingKept", rua: "mailto:a@example.com!10m, mailto:b@example.com",
			want: "mailto:a@example.com!10m, mailto:b@example.com,mailto:r@mw.test"},
		{name: "NamedAnyCase", rua: "MAILTO:R@MW.TEST!10m", want: "MAILTO:R@MW.TEST!10m", namesAlready: true},
		{name: "NamedPercentEncoded", rua: "mailto:r%40mw.test", want: "mailto:r%40mw.test", namesAlready: true},
		{name: "OtherSchemeIgnored", rua: "https://r@mw.test", want: "https://r@mw.test,mailto:r@mw.test"},
		{name: "PreviousKeyIsOurs", rua: "mailto:dmarc+old@mw.test", ours: old, want: "mailto:dmarc+old@mw.test", namesAlready: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, named := dnsfix.MergeRUA(tc.rua, "r@mw.test", tc.ours)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.namesAlready, named)
		})
	}
}

func TestTagValue(t *testing.T) {
	t.Parallel()
	v, ok := dnsfix.TagValue("v=DMARC1; p=none; RUA = mailto:a@example.com!10m, mailto:b@example.com ;", "rua")
	require.True(t, ok)
	require.Equal(t, "mailto:a@example.com!10m, mailto:b@example.com", v)
	_, ok = dnsfix.TagValue("v=DMARC1; p=none", "rua")
	require.False(t, ok)
}
