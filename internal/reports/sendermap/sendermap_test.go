package sendermap_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/reports/sendermap"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	require.Greater(t, sendermap.Size(), 38000)
	for _, c := range []struct{ ptr, base, name, typ string }{
		{"a27-5.smtp-out.amazonses.com.", "amazonses.com", "Amazon SES", "SaaS"},
		{"mta-178-34.mtasv.net", "mtasv.net", "Postmark", "SaaS"},
		{"mail-wr1-f54.google.com", "google.com", "Google (Including Gmail and Google Workspace)", "Email Provider"},
	} {
		require.Equal(t, c.base, sendermap.BaseDomain(c.ptr))
		s, ok := sendermap.Lookup(c.base)
		require.True(t, ok, c.base)
		require.Equal(t, c.name, s.Name)
		require.Equal(t, c.typ, s.Type)
	}
	// A suffix override wins over the public suffix list.
	require.Equal(t, "yandexcloud.net", sendermap.BaseDomain("host-1.abc.yandexcloud.net"))
	_, ok := sendermap.Lookup(sendermap.BaseDomain("host.unknown-sender.example"))
	require.False(t, ok)
}
