package notify

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jhillyerd/enmime"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/notify/smtptest"
)

func TestParseRelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw      string
		addr     string
		implicit bool
		user     string
		pass     string
		err      string
	}{
		{raw: "smtp://relay.example.com", addr: "relay.example.com:587"},
		{raw: "smtps://relay.example.com", addr: "relay.example.com:465", implicit: true},
		{raw: "smtp://u%40x:p%3Ass@relay.example.com:2525", addr: "relay.example.com:2525", user: "u@x", pass: "p:ss"},
		{raw: "smtp://127.0.0.1:25", addr: "127.0.0.1:25"},
		{raw: "http://relay.example.com", err: "must start with smtp://"},
		{raw: "smtp://", err: "no host"},
		{raw: "smtp://relay.example.com/x", err: "no path"},
	} {
		r, err := ParseRelay(tc.raw)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.raw)
			continue
		}
		require.NoError(t, err, tc.raw)
		require.Equal(t, tc.addr, r.Addr())
		require.Equal(t, tc.implicit, r.implicitTLS)
		require.Equal(t, tc.user, r.username)
		require.Equal(t, tc.pass, r.password)
	}
	r, err := ParseRelay("")
	require.NoError(t, err)
	require.Nil(t, r)
	require.ErrorIs(t, r.Send(context.Background(), "a@example.com", []string{"b@example.com"}, nil), ErrNoRelay)
}

// selfSigned returns a server TLS config for 127.0.0.1 and a client config
// trusting it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relay"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool}
}

func testMailer(relay *Relay) *Mailer {
	return &Mailer{Relay: relay, From: "mailwatch <notifications@mailwatch.test>", BaseURL: "https://app.mailwatch.test"}
}

func TestRelaySends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	msg := Message{To: []string{"ops@example.com"}, Subject: "hi", Text: "plain", HTML: "<p>html</p>"}
	t.Run("PlainLoopback", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t, smtptest.Options{})
		r, err := ParseRelay("smtp://" + srv.Addr())
		require.NoError(t, err)
		require.NoError(t, testMailer(r).Send(ctx, msg, time.Now()))
		got := srv.Wait(t, 1)[0]
		require.Equal(t, "notifications@mailwatch.test", got.From)
		require.Equal(t, []string{"ops@example.com"}, got.To)
		require.False(t, got.TLS)
	})
	t.Run("STARTTLSWithAuth", func(t *testing.T) {
		t.Parallel()
		serverTLS, clientTLS := selfSigned(t)
		srv := smtptest.Start(t, smtptest.Options{User: "mw", Password: "s3cret", TLSConfig: serverTLS})
		r, err := ParseRelay("smtp://mw:s3cret@" + srv.Addr())
		require.NoError(t, err)
		r.noPlainLoopback, r.TLSConfig = true, clientTLS
		require.NoError(t, testMailer(r).Send(ctx, msg, time.Now()))
		got := srv.Wait(t, 1)[0]
		require.True(t, got.TLS)
		require.Equal(t, "mw", got.User)
	})
	t.Run("STARTTLSRequired", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t, smtptest.Options{})
		r, err := ParseRelay("smtp://mw:s3cret@" + srv.Addr())
		require.NoError(t, err)
		r.noPlainLoopback = true
		require.ErrorContains(t, testMailer(r).Send(ctx, msg, time.Now()), "STARTTLS")
		require.Empty(t, srv.Messages())
	})
	t.Run("ImplicitTLS", func(t *testing.T) {
		t.Parallel()
		serverTLS, clientTLS := selfSigned(t)
		srv := smtptest.Start(t, smtptest.Options{User: "mw", Password: "s3cret", TLSConfig: serverTLS, ImplicitTLS: true})
		r, err := ParseRelay("smtps://mw:s3cret@" + srv.Addr())
		require.NoError(t, err)
		r.TLSConfig = clientTLS
		require.NoError(t, testMailer(r).Send(ctx, msg, time.Now()))
		require.Equal(t, "mw", srv.Wait(t, 1)[0].User)
	})
	t.Run("WrongPasswordIsPermanent", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t, smtptest.Options{User: "mw", Password: "s3cret"})
		r, err := ParseRelay("smtp://mw:nope@" + srv.Addr())
		require.NoError(t, err)
		err = testMailer(r).Send(ctx, msg, time.Now())
		require.Error(t, err)
		require.True(t, Permanent(err), "%v", err)
	})
	t.Run("DownIsTemporary", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		r, err := ParseRelay("smtp://" + addr)
		require.NoError(t, err)
		err = testMailer(r).Send(ctx, msg, time.Now())
		require.Error(t, err)
		require.False(t, Permanent(err))
	})
}

func TestAlertMessage(t *testing.T) {
	t.Parallel()
	domain := "ex<ample>.com"
	ev := dbsqlc.Event{ID: uuid.Must(uuid.NewV7()), EventType: "health_score_changed", Severity: "critical", Domain: &domain,
		Payload: []byte(`{"domain":"<script>alert(1)</script>","previous_score":90,"score":45,"delta":-45}`), CreatedAt: time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)}
	ml := testMailer(nil)
	m, err := ml.AlertMessage(ev, []string{"ops@example.com", "oncall@example.com"})
	require.NoError(t, err)
	raw, err := ml.Build(m, time.Now())
	require.NoError(t, err)
	env, err := enmime.ReadEnvelope(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Empty(t, env.Errors)
	require.Equal(t, "[mailwatch] Alert: Health score changed on ex<ample>.com", env.GetHeader("Subject"))
	require.Contains(t, env.Text, "<script>alert(1)</script>: score fell from 90 to 45", "the summary says what happened")
	require.Contains(t, env.Text, "Type:     health_score_changed")
	require.Equal(t, "auto-generated", env.GetHeader("Auto-Submitted"))
	link := "https://app.mailwatch.test/alerts?event=" + ev.ID.String()
	require.Contains(t, env.Text, link)
	require.Contains(t, env.Text, `"score": 45`)
	require.Contains(t, env.HTML, `href="`+link+`"`)
	require.NotContains(t, env.HTML, "<script>", "the HTML part escapes the payload")
	require.Contains(t, env.HTML, "&lt;script&gt;")
	require.True(t, strings.HasPrefix(env.Root.ContentType, "multipart/alternative"))
	require.Contains(t, env.Text, "Likely causes")
	require.Contains(t, env.Text, "none found", "a critical event without causes says none was found")

	// With a cause: its title, summary and time, in both parts.
	ev.Payload = []byte(`{"domain":"ex.com","previous_score":90,"score":45,"delta":-45,"likely_causes":[{"event_id":"0193a1d2-0000-7000-8000-000000000001",
		"event_type":"dns_record_changed","at":"2026-11-24T06:00:00Z","title":"DNS record changed","summary":"SPF record changed: pass → permerror",
		"score":98,"evidence":{"check":"spf"}}]}`)
	m, err = ml.AlertMessage(ev, []string{"ops@example.com"})
	require.NoError(t, err)
	require.Contains(t, m.Text, "- DNS record changed: SPF record changed: pass → permerror (2026-11-24 06:00 UTC, event 0193a1d2-0000-7000-8000-000000000001)")
	require.Contains(t, m.HTML, "<li><strong>DNS record changed</strong>: SPF record changed: pass → permerror (2026-11-24 06:00 UTC)</li>")
	ev.Severity = "warning"
	m, err = ml.AlertMessage(ev, []string{"ops@example.com"})
	require.NoError(t, err)
	require.NotContains(t, m.Text, "Likely causes", "only critical events look for causes")
}

// TestVerifyMessageStatesTheTokenLifetime: the mail promises the lifetime
// the token is stored with, in both parts.
func TestVerifyMessageStatesTheTokenLifetime(t *testing.T) {
	t.Parallel()
	m, err := testMailer(nil).VerifyMessage("ops@example.com", "tok")
	require.NoError(t, err)
	hours := fmt.Sprintf("for %d hours", int(VerificationTokenTTL/time.Hour))
	require.Equal(t, "for 48 hours", hours)
	require.Contains(t, m.Text, "it works once, "+hours)
	require.Contains(t, m.HTML, "it works once, "+hours)
	require.Contains(t, m.Text, "/notifications/verify?token=tok")
}
