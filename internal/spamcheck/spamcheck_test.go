package spamcheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/spamcheck"
)

// gtube is SpamAssassin's standard test message: its body string alone
// scores far above any threshold.
const gtube = "From: Sender <sender@example.net>\r\nTo: Recipient <recipient@example.net>\r\n" +
	"Subject: Test spam mail (GTUBE)\r\nMessage-ID: <gtube.1@example.net>\r\nDate: Wed, 23 Jul 2003 23:30:00 +0200\r\n\r\n" +
	"This is the GTUBE.\r\n\r\nXJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X\r\n"

const clean = "From: Alice <alice@example.org>\r\nTo: Bob <bob@example.org>\r\nSubject: Lunch on Thursday\r\n" +
	"Message-ID: <lunch.42@example.org>\r\nDate: Tue, 24 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n\r\nHi Bob,\r\n\r\nShall we meet at noon by the station?\r\n\r\nAlice\r\n"

// spamdAddr is the loopback spamd scripts/test starts (SPAMD_TEST_ADDR).
// Without one the live tests skip, unless SPAM_TEST_REQUIRED=1 (CI).
func spamdAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("SPAMD_TEST_ADDR")
	if addr == "" {
		if os.Getenv("SPAM_TEST_REQUIRED") == "1" {
			t.Fatal("SPAM_TEST_REQUIRED=1 but SPAMD_TEST_ADDR is not set: scripts/test starts spamd on loopback")
		}
		t.Skip("SPAMD_TEST_ADDR not set: no spamd on loopback (scripts/test starts one)")
	}
	return addr
}

// TestSpamdScoresGTUBEAndCleanMail asks a real spamd (network tests off).
func TestSpamdScoresGTUBEAndCleanMail(t *testing.T) {
	t.Parallel()
	c := &spamcheck.Spamd{Addr: spamdAddr(t)}
	t.Logf("spamd at %s", c.Addr)
	env := spamcheck.Envelope{ClientIP: netip.MustParseAddr("127.0.0.1"), Helo: "mail.example.net", MailFrom: "sender@example.net"}

	spam, err := c.Check(context.Background(), []byte(gtube), env)
	require.NoError(t, err)
	require.Equal(t, "spamassassin", spam.Engine)
	require.True(t, spam.Spam)
	require.Greater(t, spam.Score, 100.0, "GTUBE scores far above the threshold")
	require.Positive(t, spam.Threshold)
	require.NotEmpty(t, spam.Rules)
	require.Equal(t, "GTUBE", spam.Rules[0].Name, "the heaviest rule comes first: %+v", spam.Rules)
	require.GreaterOrEqual(t, spam.Rules[0].Points, 100.0)
	require.NotEmpty(t, spam.Rules[0].Description)

	ham, err := c.Check(context.Background(), []byte(clean), env)
	require.NoError(t, err)
	require.False(t, ham.Spam)
	require.Less(t, ham.Score, ham.Threshold)
	for _, r := range ham.Rules {
		require.NotEqual(t, "GTUBE", r.Name)
	}
}

// A message over the size bound is not sent.
func TestTooLargeIsNotSent(t *testing.T) {
	t.Parallel()
	big := []byte(clean + strings.Repeat("x", spamcheck.MaxMessage))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	for _, c := range []spamcheck.Checker{
		&spamcheck.Spamd{Addr: ln.Addr().String()},
		&spamcheck.Rspamd{URL: "http://" + ln.Addr().String()},
	} {
		_, err := c.Check(context.Background(), big, spamcheck.Envelope{})
		require.ErrorIs(t, err, spamcheck.ErrTooLarge)
	}
}

// fakeSpamd answers every connection with answer after reading the request.
func fakeSpamd(t *testing.T, answer func(req string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, _ := io.ReadAll(conn)
				_, _ = io.WriteString(conn, answer(string(req)))
			}()
		}
	}()
	return ln.Addr().String()
}

func TestSpamdProtocol(t *testing.T) {
	t.Parallel()
	var got string
	reply := "SPAMD/1.1 0 EX_OK\r\nContent-length: 400\r\nSpam: False ; 2.5 / 5.0\r\n\r\n" +
		"Content analysis details:   (2.5 points, 5.0 required)\r\n\r\n" +
		" pts rule name              description\r\n" +
		"---- ---------------------- --------------------------------------------------\r\n" +
		" 0.5 MISSING_MID            Missing Message-Id: header\r\n" +
		" 2.0 URI_SHORTENER          BODY: links through a URL shortener, which\r\n" +
		"                            hides where they lead\r\n" +
		"-0.0 NO_RELAYS              Informational: message was not relayed via SMTP\r\n" +
		"\r\n"
	addr := fakeSpamd(t, func(req string) string { got = req; return reply })
	res, err := (&spamcheck.Spamd{Addr: addr}).Check(context.Background(), []byte(clean),
		spamcheck.Envelope{ClientIP: netip.MustParseAddr("192.0.2.7"), Helo: "out.example.org"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(got, "REPORT SPAMC/1.5\r\nContent-length: "), got)
	require.Contains(t, got, "\r\n\r\nReceived: from out.example.org ([192.0.2.7])\r\n", "the client reaches spamd as a trace header")
	require.True(t, strings.HasSuffix(got, clean))
	require.Equal(t, spamcheck.Result{Engine: "spamassassin", Score: 2.5, Threshold: 5, Rules: []spamcheck.Rule{
		{Name: "URI_SHORTENER", Points: 2, Description: "BODY: links through a URL shortener, which hides where they lead"},
		{Name: "MISSING_MID", Points: 0.5, Description: "Missing Message-Id: header"},
		{Name: "NO_RELAYS", Points: 0, Description: "Informational: message was not relayed via SMTP"},
	}}, res)

	for answer, want := range map[string]string{
		"SPAMD/1.0 76 Bad header line: (EOF)\r\n":                                               "spamd: error 76: Bad header line: (EOF)",
		"HTTP/1.1 400 Bad Request\r\n\r\n":                                                      "unexpected answer",
		"SPAMD/1.1 0 EX_OK\r\nContent-length: 0\r\n\r\n":                                        "no Spam header",
		"SPAMD/1.1 0 EX_OK\r\nSpam: True ; lots / 5.0\r\n\r\n":                                  "unreadable Spam header",
		"SPAMD/1.1 0 EX_OK\r\nSpam: " + strings.Repeat("x", spamcheck.MaxResponse) + "\r\n\r\n": "over",
	} {
		addr := fakeSpamd(t, func(string) string { return answer })
		_, err := (&spamcheck.Spamd{Addr: addr}).Check(context.Background(), []byte(clean), spamcheck.Envelope{})
		require.ErrorContains(t, err, want)
	}
}

// A spamd that never answers costs at most the caller's context.
func TestSpamdHonoursContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := (&spamcheck.Spamd{Addr: ln.Addr().String()}).Check(ctx, []byte(clean), spamcheck.Envelope{})
		done <- err
	}()
	conn := <-accepted
	defer conn.Close()
	cancel()
	require.Error(t, <-done)
}

func TestRspamd(t *testing.T) {
	t.Parallel()
	var hdr http.Header
	var body string
	status, reply := http.StatusOK, ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/checkv2", r.URL.Path)
		require.Equal(t, http.MethodPost, r.Method)
		hdr = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	defer srv.Close()
	c := &spamcheck.Rspamd{URL: srv.URL + "/", Password: "s3cret"}
	env := spamcheck.Envelope{ClientIP: netip.MustParseAddr("::ffff:192.0.2.9"), Helo: "out.example.org", MailFrom: "bounce@example.org"}

	reply = mustJSON(t, map[string]any{
		"is_skipped": false, "score": 16.5, "required_score": 15, "action": "reject",
		"symbols": map[string]any{
			"GTUBE":        map[string]any{"name": "GTUBE", "score": 15, "metric_score": 15, "description": "Test spam"},
			"R_DKIM_ALLOW": map[string]any{"name": "R_DKIM_ALLOW", "score": -0.2, "description": "DKIM verification succeed"},
			"MIME_GOOD":    map[string]any{"name": "MIME_GOOD", "score": -0.1},
			"bad name!":    map[string]any{"name": "bad name!", "score": 99},
		},
	})
	res, err := c.Check(context.Background(), []byte(clean), env)
	require.NoError(t, err)
	require.Equal(t, clean, body)
	require.Equal(t, "192.0.2.9", hdr.Get("Ip"))
	require.Equal(t, "out.example.org", hdr.Get("Helo"))
	require.Equal(t, "bounce@example.org", hdr.Get("From"))
	require.Equal(t, "s3cret", hdr.Get("Password"))
	require.Equal(t, spamcheck.Result{Engine: "rspamd", Score: 16.5, Threshold: 15, Spam: true, Rules: []spamcheck.Rule{
		{Name: "GTUBE", Points: 15, Description: "Test spam"},
		{Name: "R_DKIM_ALLOW", Points: -0.2, Description: "DKIM verification succeed"},
		{Name: "MIME_GOOD", Points: -0.1},
	}}, res)

	reply = `{"score": 1.2, "required_score": 15, "action": "no action", "symbols": {}}`
	res, err = c.Check(context.Background(), []byte(clean), spamcheck.Envelope{})
	require.NoError(t, err)
	require.False(t, res.Spam)
	require.Empty(t, res.Rules)
	require.NotNil(t, res.Rules)

	for _, tc := range []struct {
		status int
		reply  string
		want   string
	}{
		{http.StatusOK, `{"is_skipped": true, "action": "no action"}`, "skipped"},
		{http.StatusOK, `not json`, "unreadable answer"},
		{http.StatusInternalServerError, `{"error": "worker busy"}`, "HTTP 500"},
		{http.StatusOK, `"` + strings.Repeat("x", spamcheck.MaxResponse) + `"`, "over"},
	} {
		status, reply = tc.status, tc.reply
		_, err := c.Check(context.Background(), []byte(clean), spamcheck.Envelope{})
		require.ErrorContains(t, err, tc.want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func FuzzParseSpamdReport(f *testing.F) {
	f.Add([]byte("SPAMD/1.1 0 EX_OK\r\nSpam: True ; 1000.0 / 5.0\r\n\r\n pts rule name description\r\n---- ---\r\n1000 GTUBE  BODY: x\r\n   more\r\n\r\n"))
	f.Add([]byte("SPAMD/1.0 76 Bad header line\r\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := spamcheck.ParseSpamdReport(b)
		if err != nil {
			return
		}
		if len(res.Rules) > spamcheck.MaxRules {
			t.Fatalf("%d rules kept", len(res.Rules))
		}
	})
}

func FuzzParseRspamdReply(f *testing.F) {
	f.Add([]byte(`{"score": 1, "required_score": 15, "action": "no action", "symbols": {"A": {"name": "A", "score": 1}}}`))
	f.Add([]byte(`{"is_skipped": true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := spamcheck.ParseRspamdReply(b)
		if err != nil {
			return
		}
		if len(res.Rules) > spamcheck.MaxRules {
			t.Fatalf("%d rules kept", len(res.Rules))
		}
		_ = fmt.Sprint(res)
	})
}
