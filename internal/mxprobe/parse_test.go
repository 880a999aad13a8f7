package mxprobe

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

func TestMatchMX(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, host string
		want          bool
	}{
		{"mx.example.com", "mx.example.com", true},
		{"MX.Example.COM.", "mx.example.com", true},
		{"mx.example.com", "MX.EXAMPLE.COM.", true},
		{"*.example.com", "mx1.example.com", true},
		{"*.example.com", "MX1.Example.Com.", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", ".example.com", false},
		{"*.example.com", "xexample.com", false},
		{"*.example.com", "mx.example.net", false},
		{"mx*.example.com", "mx1.example.com", false},
		{"a.*.example.com", "a.b.example.com", false},
		{"*", "com", false},
		{"*.", "com", false},
		{"*.*.example.com", "a.b.example.com", false},
		{"", "", false},
		{"mx.example.com", "", false},
		{"*.example.com", "*.example.com", false},
		{strings.Repeat("a.", 130) + "com", strings.Repeat("a.", 130) + "com", false},
	} {
		require.Equal(t, tc.want, MatchMX(tc.pattern, tc.host), "%q %q", tc.pattern, tc.host)
	}
	require.True(t, MatchesAny([]string{"mx.other.com", "*.example.com"}, "mx.example.com"))
	require.False(t, MatchesAny(nil, "mx.example.com"))
}

// matchMXByLabels is an independent reading of RFC 8461 section 4.1, by
// labels, for the fuzz test to compare with.
func matchMXByLabels(pattern, host string) bool {
	p := strings.Split(normalizeName(pattern), ".")
	h := strings.Split(normalizeName(host), ".")
	if len(normalizeName(pattern)) > maxNameLength || len(normalizeName(host)) > maxNameLength || len(p) != len(h) {
		return false
	}
	for i := range p {
		if h[i] == "" || strings.Contains(h[i], "*") {
			return false
		}
		switch {
		case i == 0 && p[0] == "*" && len(p) > 1:
		case p[i] == "" || strings.Contains(p[i], "*"):
			return false
		case p[i] != h[i]:
			return false
		}
	}
	return true
}

func FuzzMatchMX(f *testing.F) {
	for _, s := range [][2]string{
		{"*.example.com", "mx.example.com"}, {"mx.example.com", "mx.example.com."},
		{"*.example.com", "a.b.example.com"}, {"*.", "a."}, {"*", "a"}, {"a..b", "a..b"},
		{"*.EXAMPLE.com", "Mx.example.COM"}, {" mx.example.com ", "mx.example.com"}, {"*..", ".."},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, host string) {
		got := MatchMX(pattern, host)
		if want := matchMXByLabels(pattern, host); got != want {
			t.Fatalf("MatchMX(%q, %q) = %v, by labels %v", pattern, host, got, want)
		}
		if got && MatchMX(pattern, "x."+normalizeName(host)) {
			t.Fatalf("%q matches both %q and one label more", pattern, host)
		}
	})
}

func TestReadReply(t *testing.T) {
	t.Parallel()
	read := func(s string) (reply, error) {
		return readReply(newReplyReader(strings.NewReader(s)))
	}
	rep, err := read("250-mx.example.com Hello\r\n250-PIPELINING\r\n250-starttls\r\n250 SIZE 1000\r\n")
	require.NoError(t, err)
	require.Equal(t, 250, rep.Code)
	require.Equal(t, []string{"mx.example.com Hello", "PIPELINING", "starttls", "SIZE 1000"}, rep.Lines)
	require.Equal(t, []string{"PIPELINING", "STARTTLS", "SIZE"}, ehloExtensions(rep))

	rep, err = read("220\n")
	require.NoError(t, err)
	require.Equal(t, reply{Code: 220, Lines: []string{""}}, rep)

	rep, err = read("554 5.7.1 go away\r\n")
	require.NoError(t, err)
	require.Equal(t, "554 5.7.1 go away", rep.text())

	for _, bad := range []string{
		"", "220", "22\r\n", "abc hello\r\n", "120 too low\r\n", "620 too high\r\n", "220xhello\r\n",
		"250-a\r\n251 b\r\n", "250-a\r\n",
		"220 " + strings.Repeat("x", maxLineLength) + "\r\n",
		strings.Repeat("250-x\r\n", maxReplyLines+1),
		strings.Repeat("250-"+strings.Repeat("x", 1000)+"\r\n", 70),
	} {
		_, err := read(bad)
		require.Error(t, err, "%.40q", bad)
	}
	_, err = read(strings.Repeat("250-x\r\n", maxReplyLines-1) + "250 x\r\n")
	require.NoError(t, err, "exactly the line cap")

	require.Equal(t, "a?b??", cleanText("a\x00b\r\n"))
	require.Len(t, cleanText(strings.Repeat("x", 10000)), maxTextLength)
}

func FuzzReadReply(f *testing.F) {
	for _, s := range []string{
		"220 mx.example.com ESMTP\r\n",
		"250-mx\r\n250-STARTTLS\r\n250 8BITMIME\r\n",
		"554\r\n", "250-a\n250 b\n", "421-\r\n421 \r\n", "250-a\r\n251 b\r\n", "2\xff0 x\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newReplyReader(bytes.NewReader(data))
		for range 10 {
			rep, err := readReply(r)
			if err != nil {
				return
			}
			if rep.Code < 200 || rep.Code > 599 {
				t.Fatalf("code %d", rep.Code)
			}
			if len(rep.Lines) == 0 || len(rep.Lines) > maxReplyLines {
				t.Fatalf("%d lines", len(rep.Lines))
			}
			for _, l := range rep.Lines {
				if len(l) > maxLineLength {
					t.Fatalf("line of %d bytes", len(l))
				}
			}
			if txt := rep.text(); len(txt) > maxTextLength {
				t.Fatalf("text of %d bytes", len(txt))
			}
			_ = ehloExtensions(rep)
		}
	})
}

// The reply reader never reads past its byte budget, whatever the source.
func TestReplyReaderBudget(t *testing.T) {
	t.Parallel()
	src := &countingReader{}
	r := newReplyReader(src)
	var err error
	for err == nil {
		_, err = readReply(r)
	}
	require.ErrorIs(t, err, errReadBudget)
	require.LessOrEqual(t, src.n, int64(maxReadBytes))
}

// countingReader is an endless source of "250 x" lines.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	const line = "250 x\r\n"
	for i := range p {
		p[i] = line[(c.n+int64(i))%int64(len(line))]
	}
	c.n += int64(len(p))
	return len(p), nil
}

func TestExpiryThreshold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		days      int
		threshold int
		severity  Severity
		ok        bool
	}{
		{90, 0, "", false},
		{31, 0, "", false},
		{30, 30, SeverityWarning, true},
		{15, 30, SeverityWarning, true},
		{14, 14, SeverityWarning, true},
		{8, 14, SeverityWarning, true},
		{7, 7, SeverityCritical, true},
		{0, 7, SeverityCritical, true},
		{-3, 7, SeverityCritical, true},
	} {
		threshold, sev, ok := ExpiryThreshold(tc.days)
		require.Equal(t, tc.threshold, threshold, tc.days)
		require.Equal(t, tc.severity, sev, tc.days)
		require.Equal(t, tc.ok, ok, tc.days)
	}
}

func TestDaysLeft(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		offset string
		want   int
	}{
		{"120h", 5}, {"143h59m", 5}, {"144h", 6}, {"1m", 0}, {"0s", 0}, {"-1s", -1}, {"-24h", -1}, {"-24h1s", -2},
	} {
		d, err := time.ParseDuration(tc.offset)
		require.NoError(t, err)
		require.Equal(t, tc.want, daysLeft(testNow.Add(d), testNow), tc.offset)
	}
}

func TestReverseDNS(t *testing.T) {
	t.Parallel()
	srv := dnstest.Start(t, `
2.0.0.127.in-addr.arpa. PTR liar.test.
2.0.0.127.in-addr.arpa. PTR honest.test.
liar.test.   A 192.0.2.1
honest.test. A 127.0.0.2
3.0.0.127.in-addr.arpa. PTR dangling.test.
1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa. PTR six.test.
six.test. AAAA ::1
`)
	r := dnscheck.NewClient(srv.Addr(), 0)
	ctx := context.Background()

	got := reverseDNS(ctx, r, netip.MustParseAddr("127.0.0.2"))
	require.True(t, got.Confirmed)
	require.Equal(t, "honest.test", got.ConfirmedName)
	require.ElementsMatch(t, []string{"liar.test", "honest.test"}, got.Names)

	got = reverseDNS(ctx, r, netip.MustParseAddr("127.0.0.3"))
	require.Equal(t, ReverseDNS{Names: []string{"dangling.test"}}, got, "a PTR name without addresses does not confirm")

	got = reverseDNS(ctx, r, netip.MustParseAddr("127.0.0.4"))
	require.Equal(t, ReverseDNS{}, got, "no PTR")

	got = reverseDNS(ctx, r, netip.MustParseAddr("::1"))
	require.True(t, got.Confirmed)
	require.Equal(t, "six.test", got.ConfirmedName)

	srv.ServFail("5.0.0.127.in-addr.arpa")
	got = reverseDNS(ctx, r, netip.MustParseAddr("127.0.0.5"))
	require.False(t, got.Confirmed)
	require.True(t, got.Temporary)
}

func TestLoadCAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := LoadCAFile(dir + "/missing.pem")
	require.Error(t, err)
	require.NoError(t, os.WriteFile(dir+"/empty.pem", []byte("not pem"), 0o600))
	_, err = LoadCAFile(dir + "/empty.pem")
	require.Error(t, err)
	pki := newTestPKI(t)
	require.NoError(t, os.WriteFile(dir+"/ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pki.cert.Raw}), 0o600))
	pool, err := LoadCAFile(dir + "/ca.pem")
	require.NoError(t, err)
	require.True(t, pool.Equal(pki.pool))
}
