package main

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/config"
)

// TestBlocklistCheckerWarnsOfPublicResolvers: the worker warns at start-up
// when the blocklist lookups would go through a public resolver (most lists
// refuse them), whether set by BLOCKLIST_RESOLVER or inherited from
// DNS_RESOLVER, and says nothing for one's own resolver.
func TestBlocklistCheckerWarnsOfPublicResolvers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		cfg          config.Config
		warn         bool
		zonesChecked int
	}{
		{"inherited public", config.Config{DNSResolver: "8.8.8.8:53"}, true, 0},
		{"own public", config.Config{DNSResolver: "127.0.0.1:53", BlocklistResolver: "1.1.1.1"}, true, 0},
		{"own resolver", config.Config{DNSResolver: "8.8.8.8:53", BlocklistResolver: "127.0.0.1:5353", BlocklistZones: "bl.test"}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			c, err := blocklistChecker(&tc.cfg, slog.New(slog.NewTextHandler(&buf, nil)))
			require.NoError(t, err)
			require.Equal(t, tc.warn, bytes.Contains(buf.Bytes(), []byte("public DNS resolver")), buf.String())
			if tc.zonesChecked > 0 {
				require.Len(t, c.Lists, tc.zonesChecked)
			}
		})
	}
	_, err := blocklistChecker(&config.Config{BlocklistZones: "not a zone!"}, nil)
	require.Error(t, err)
}
