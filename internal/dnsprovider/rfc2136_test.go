package dnsprovider_test

import (
	"context"
	"errors"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/bindtest"
	"github.com/mailwatch/mailwatch/internal/dnsprovider"
)

const apexTXT = `example.test. IN TXT "v=spf1 include:a.example include:b.example ~all"
example.test. IN TXT "google-site-verification=abc123"
example.test. IN TXT "MS=ms12345"
example.test. IN MX 10 mx.example.test.
`

func newRFC2136(t *testing.T, srv *bindtest.Server, secret string) *dnsprovider.RFC2136 {
	t.Helper()
	p, err := dnsprovider.NewRFC2136(dnsprovider.RFC2136Config{
		Server: srv.Addr, TSIGKeyName: bindtest.KeyName, TSIGAlgorithm: "hmac-sha256", TSIGSecret: secret,
	}, nil)
	require.NoError(t, err)
	return p
}

func TestRFC2136(t *testing.T) {
	t.Parallel()
	srv := bindtest.Start(t, "example.test", apexTXT)
	ctx := context.Background()
	p := newRFC2136(t, srv, srv.Secret)

	t.Run("VerifyAndFindZone", func(t *testing.T) {
		require.NoError(t, p.Verify(ctx))
		z, err := p.FindZone(ctx, "_dmarc.example.test")
		require.NoError(t, err)
		require.Equal(t, dnsprovider.Zone{Name: "example.test", ID: "example.test"}, z)

		_, err = p.FindZone(ctx, "other.invalid")
		require.ErrorIs(t, err, dnsprovider.ErrZoneNotFound)
	})

	t.Run("WrongKeyRefused", func(t *testing.T) {
		bad := newRFC2136(t, srv, "c2VjcmV0LXRoYXQtdGhlLXNlcnZlci1kb2VzLW5vdC1rbm93")
		err := bad.Verify(ctx)
		var pe *dnsprovider.ProviderError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "TSIG key", pe.What)
		require.Contains(t, pe.Message, "BADSIG")

		unknown, err := dnsprovider.NewRFC2136(dnsprovider.RFC2136Config{Server: srv.Addr, TSIGKeyName: "nobody.", TSIGSecret: srv.Secret}, nil)
		require.NoError(t, err)
		err = unknown.Verify(ctx)
		require.ErrorAs(t, err, &pe)
		require.Contains(t, pe.Message, "BADKEY")

		// And a refused key cannot write.
		z := dnsprovider.Zone{Name: "example.test", ID: "example.test"}
		err = bad.Apply(ctx, z, dnsprovider.Change{Name: "x.example.test", Type: "TXT", Add: []string{"nope"}})
		require.ErrorAs(t, err, &pe)
		got, err := srv.Query(ctx, "x.example.test", dns.TypeTXT)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	zone := dnsprovider.Zone{Name: "example.test", ID: "example.test"}

	t.Run("Create", func(t *testing.T) {
		c := dnsprovider.Change{Name: "_dmarc.example.test", Type: "TXT", TTL: 300, Add: []string{"v=DMARC1; p=none; rua=mailto:d@example.test"}}
		require.NoError(t, p.Apply(ctx, zone, c))
		got, err := srv.Query(ctx, "_dmarc.example.test", dns.TypeTXT)
		require.NoError(t, err)
		require.Equal(t, []string{"v=DMARC1; p=none; rua=mailto:d@example.test"}, got)

		// Creating again from the same (empty) observation is a conflict:
		// the RRset exists now.
		err = p.Apply(ctx, zone, c)
		var ce *dnsprovider.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, []string{"v=DMARC1; p=none; rua=mailto:d@example.test"}, ce.Current)
	})

	t.Run("SPFOnlyKeepsOtherTXT", func(t *testing.T) {
		cur, err := p.Read(ctx, zone, "example.test", "TXT")
		require.NoError(t, err)
		require.Len(t, cur.Values, 3)
		old := "v=spf1 include:a.example include:b.example ~all"
		c := dnsprovider.Change{Name: "example.test", Type: "TXT", Current: cur.Values, Remove: []string{old}, Add: []string{"v=spf1 ip4:192.0.2.0/24 -all"}}
		require.Equal(t, dnsprovider.OpReplaceRR, c.Op())
		require.NoError(t, p.Apply(ctx, zone, c))
		got, err := srv.Query(ctx, "example.test", dns.TypeTXT)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"v=spf1 ip4:192.0.2.0/24 -all", "google-site-verification=abc123", "MS=ms12345"}, got)
		mx, err := srv.Query(ctx, "example.test", dns.TypeMX)
		require.NoError(t, err)
		require.Equal(t, []string{"10 mx.example.test."}, mx)
	})

	t.Run("ConcurrentEditConflicts", func(t *testing.T) {
		cur, err := p.Read(ctx, zone, "example.test", "TXT")
		require.NoError(t, err)
		// Someone else adds a TXT record at the apex after we looked.
		require.NoError(t, srv.Update(ctx, func(m *dns.Msg) {
			rr, _ := dns.NewRR(`example.test. 300 IN TXT "stripe-verification=zzz"`)
			m.Insert([]dns.RR{rr})
		}))
		c := dnsprovider.Change{Name: "example.test", Type: "TXT", Current: cur.Values, Remove: []string{"v=spf1 ip4:192.0.2.0/24 -all"}, Add: []string{"v=spf1 ip4:198.51.100.0/24 -all"}}
		err = p.Apply(ctx, zone, c)
		var ce *dnsprovider.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Current, "stripe-verification=zzz")
		// Nothing was written.
		got, err := srv.Query(ctx, "example.test", dns.TypeTXT)
		require.NoError(t, err)
		require.Contains(t, got, "v=spf1 ip4:192.0.2.0/24 -all")
		require.NotContains(t, got, "v=spf1 ip4:198.51.100.0/24 -all")
	})

	t.Run("DeleteAndLongTXT", func(t *testing.T) {
		long := "v=spf1"
		for range 40 {
			long += " ip4:203.0.113.1"
		}
		long += " -all"
		c := dnsprovider.Change{Name: "long.example.test", Type: "TXT", Add: []string{long}}
		require.NoError(t, p.Apply(ctx, zone, c))
		got, err := p.Read(ctx, zone, "long.example.test", "TXT")
		require.NoError(t, err)
		require.Equal(t, []string{long}, got.Values)
		require.NoError(t, p.Apply(ctx, zone, dnsprovider.Change{Name: "long.example.test", Type: "TXT", Current: got.Values, Remove: got.Values}))
		q, err := srv.Query(ctx, "long.example.test", dns.TypeTXT)
		require.NoError(t, err)
		require.Empty(t, q)
	})

	t.Run("Plan", func(t *testing.T) {
		plan, err := p.Plan(zone, dnsprovider.Change{Name: "example.test", Type: "TXT", Current: []string{"a"}, Remove: []string{"a"}, Add: []string{"b"}})
		require.NoError(t, err)
		msg := plan.(map[string]any)["message"].(string)
		require.Contains(t, msg, "PREREQUISITE SECTION")
		require.Contains(t, msg, `"a"`)
		require.Contains(t, msg, `"b"`)
	})
}

func TestRFC2136ConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   dnsprovider.RFC2136Config
		field string
	}{
		{dnsprovider.RFC2136Config{TSIGKeyName: "k.", TSIGSecret: "c2VjcmV0"}, "server"},
		{dnsprovider.RFC2136Config{Server: "ns1.example.com", TSIGSecret: "c2VjcmV0"}, "tsig_key_name"},
		{dnsprovider.RFC2136Config{Server: "ns1.example.com", TSIGKeyName: "k.", TSIGAlgorithm: "md5", TSIGSecret: "c2VjcmV0"}, "tsig_algorithm"},
		{dnsprovider.RFC2136Config{Server: "ns1.example.com", TSIGKeyName: "k.", TSIGSecret: "not base64!"}, "tsig_secret"},
	} {
		_, err := dnsprovider.NewRFC2136(tc.cfg, nil)
		var fe *dnsprovider.FieldError
		require.True(t, errors.As(err, &fe), "%+v", tc.cfg)
		require.Equal(t, tc.field, fe.Field)
	}
}
