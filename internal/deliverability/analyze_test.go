package deliverability_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mjl-/mox/dkim"
	moxdns "github.com/mjl-/mox/dns"
	"github.com/mjl-/mox/smtp"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// The test's signing keys: a 2048-bit key for sender.test and esp.test, a
// 1024-bit one for weak.test. Made once, they are slow to generate.
var keys = sync.OnceValue(func() map[string]*rsa.PrivateKey {
	m := map[string]*rsa.PrivateKey{}
	for domain, bits := range map[string]int{"sender.test": 2048, "esp.test": 2048, "weak.test": 1024} {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			panic(err)
		}
		m[domain] = k
	}
	return m
})

// dkimRecord is the TXT record text of a key, split in strings of at most
// 255 octets as DNS requires.
func dkimRecord(t *testing.T, k *rsa.PrivateKey) string {
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	txt := "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der)
	var parts []string
	for len(txt) > 200 {
		parts = append(parts, `"`+txt[:200]+`"`)
		txt = txt[200:]
	}
	return strings.Join(append(parts, `"`+txt+`"`), " ")
}

// setup serves the test domains on a loopback DNS server:
//   - sender.test: SPF "v=spf1 ip4:127.0.0.1 -all", DKIM key sel, DMARC p=reject.
//   - mail.sender.test: the client's PTR name, resolving back to 127.0.0.1,
//     with SPF "a -all" for the HELO identity.
//   - esp.test: an ESP with its own SPF and DKIM key, no DMARC record.
//   - other.test: SPF that does not list 127.0.0.1.
func setup(t *testing.T) (*dnstest.Server, *dnscheck.Client) {
	t.Helper()
	k := keys()
	zone := fmt.Sprintf(`
$TTL 300
sender.test.                 TXT "v=spf1 ip4:127.0.0.1 -all"
_dmarc.sender.test.          TXT "v=DMARC1; p=reject; rua=mailto:dmarc@sender.test"
sel._domainkey.sender.test.  TXT %s
mail.sender.test.            A   127.0.0.1
mail.sender.test.            TXT "v=spf1 a -all"
1.0.0.127.in-addr.arpa.      PTR mail.sender.test.
esp.test.                    TXT "v=spf1 ip4:127.0.0.1 -all"
sel._domainkey.esp.test.     TXT %s
other.test.                  TXT "v=spf1 ip4:192.0.2.1 -all"
weak.test.                   TXT "v=spf1 ip4:127.0.0.1 -all"
_dmarc.weak.test.            TXT "v=DMARC1; p=none"
sel._domainkey.weak.test.    TXT %s
`, dkimRecord(t, k["sender.test"]), dkimRecord(t, k["esp.test"]), dkimRecord(t, k["weak.test"]))
	srv := dnstest.Start(t, zone)
	return srv, dnscheck.NewClient(srv.Addr(), 2*time.Second)
}

// mail is a test message: headers in order and a body, joined with CRLF.
type mail struct {
	headers []string
	body    string
}

func (m mail) bytes() []byte {
	return []byte(strings.Join(m.headers, "\r\n") + "\r\n\r\n" + strings.ReplaceAll(m.body, "\n", "\r\n"))
}

// without returns m without the headers whose name is one of names.
func (m mail) without(names ...string) mail {
	var hs []string
	for _, h := range m.headers {
		name, _, _ := strings.Cut(h, ":")
		keep := true
		for _, n := range names {
			if strings.EqualFold(name, n) {
				keep = false
			}
		}
		if keep {
			hs = append(hs, h)
		}
	}
	m.headers = hs
	return m
}

const cleanBody = `--b1
Content-Type: text/plain; charset=utf-8

Welcome to Sender. Confirm your account by opening the confirmation page:
https://sender.test/confirm?id=42
Thanks, the Sender team.
--b1
Content-Type: text/html; charset=utf-8

<html><body><p>Welcome to Sender. Confirm your account by opening the confirmation page:</p>
<p><a href="https://sender.test/confirm?id=42">https://sender.test/confirm?id=42</a></p>
<p><img src="https://sender.test/logo.png" alt="Sender"> Thanks, the Sender team.</p></body></html>
--b1--
`

// goodMail is a well-formed bulk message from sender.test.
func goodMail() mail {
	return mail{headers: []string{
		"From: Sender <news@sender.test>",
		"To: qa@receiver.test",
		"Subject: Confirm your account",
		"Date: Sat, 28 Nov 2026 10:00:00 +0000",
		"Message-ID: <abc123@sender.test>",
		"MIME-Version: 1.0",
		"List-Unsubscribe: <https://sender.test/unsub?id=42>, <mailto:unsub@sender.test>",
		"List-Unsubscribe-Post: List-Unsubscribe=One-Click",
		`Content-Type: multipart/alternative; boundary="b1"`,
	}, body: cleanBody}
}

// signedHeaders are the headers the test signatures cover.
var signedHeaders = []string{"From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type", "List-Unsubscribe", "List-Unsubscribe-Post"}

// sign signs raw for domain with selector "sel" and returns the signed
// message.
func sign(t *testing.T, raw []byte, domain string, headers []string) []byte {
	t.Helper()
	sel := dkim.Selector{
		Hash: "sha256", HeaderRelaxed: true, BodyRelaxed: true, Headers: headers,
		PrivateKey: keys()[domain], Domain: moxdns.Domain{ASCII: "sel"},
	}
	h, err := dkim.Sign(context.Background(), slog.New(slog.DiscardHandler), smtp.Localpart("news"), moxdns.Domain{ASCII: domain}, []dkim.Selector{sel}, false, bytes.NewReader(raw))
	require.NoError(t, err)
	return append([]byte(h), raw...)
}

// session is a TLS 1.3 session from 127.0.0.1 that says HELO
// mail.sender.test.
func session(mailFrom string) deliverability.Session {
	return deliverability.Session{
		ClientIP: netip.MustParseAddr("127.0.0.1"), Helo: "mail.sender.test", MailFrom: mailFrom,
		TLSVersion: "TLS 1.3", TLSCipher: "TLS_AES_128_GCM_SHA256",
	}
}

// section returns the report's section called name.
func section(t *testing.T, rep *deliverability.Report, name string) deliverability.Section {
	t.Helper()
	for _, s := range rep.Sections {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no %s section", name)
	return deliverability.Section{}
}

// ids returns the finding IDs of a report, by section.
func ids(rep *deliverability.Report) map[string][]string {
	out := map[string][]string{}
	for _, s := range rep.Sections {
		for _, f := range s.Findings {
			out[s.Name] = append(out[s.Name], f.ID)
		}
	}
	return out
}

func has(rep *deliverability.Report, id string) bool {
	for _, s := range rep.Sections {
		for _, f := range s.Findings {
			if f.ID == id {
				return true
			}
		}
	}
	return false
}

func analyze(t *testing.T, r deliverability.Resolver, raw []byte, s deliverability.Session) *deliverability.Report {
	t.Helper()
	rep := deliverability.Analyze(context.Background(), r, raw, s, deliverability.Options{})
	for _, sec := range rep.Sections {
		for _, f := range sec.Findings {
			_, known := deliverability.WeightOf(f.ID)
			require.True(t, known, "finding %s is not in the weight table", f.ID)
			require.NotEmpty(t, f.Message)
			require.NotEmpty(t, f.Fix)
		}
	}
	return rep
}

func TestAnalyzeAllPass(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	rep := analyze(t, r, raw, session("bounce@sender.test"))

	a := rep.Auth
	require.Equal(t, "pass", string(a.SPF.Status), a.SPF.Reason)
	require.Equal(t, "sender.test", a.SPF.Domain)
	require.Equal(t, "ip4:127.0.0.1", a.SPF.Mechanism)
	require.Equal(t, "pass", string(a.HeloSPF.Status), a.HeloSPF.Reason)
	require.Len(t, a.DKIM, 1)
	sig := a.DKIM[0]
	require.Equal(t, "pass", sig.Result, sig.Error)
	require.Equal(t, "sender.test", sig.Domain)
	require.Equal(t, "sel", sig.Selector)
	require.Equal(t, "rsa-sha256", sig.Algorithm)
	require.Equal(t, 2048, sig.KeyBits)
	require.Equal(t, "pass", sig.BodyHash)
	require.Equal(t, "pass", a.DMARC.Result, a.DMARC.Reason)
	require.True(t, a.DMARC.SPFAligned)
	require.True(t, a.DMARC.DKIMAligned)
	require.Equal(t, "reject", a.DMARC.Policy)
	require.Equal(t, "none", a.DMARC.Disposition)
	require.Equal(t, "pass", a.ReverseDNS.Result)
	require.Equal(t, "mail.sender.test", a.ReverseDNS.Confirmed)
	require.False(t, a.ARC.Present)

	// Nothing to fix: the only finding is the skipped reputation section.
	require.Equal(t, map[string][]string{"reputation": {"reputation_skipped"}, "spam": {"spam_skipped"}}, ids(rep))
	require.Equal(t, 100, rep.Score)
	require.Equal(t, "A", rep.Grade)
	require.True(t, rep.Sections[1].Skipped)
	require.Contains(t, rep.Sections[1].Note, "not checked")
	require.Positive(t, rep.DNSLookups)
}

func TestAnalyzeBodyChangedAfterSigning(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	changed := bytes.Replace(raw, []byte("Thanks, the Sender team."), []byte("Thanks, the Sender team!"), 1)
	require.NotEqual(t, raw, changed)

	rep := analyze(t, r, changed, session("bounce@sender.test"))
	require.Len(t, rep.Auth.DKIM, 1)
	sig := rep.Auth.DKIM[0]
	require.Equal(t, "fail", sig.Result)
	require.Equal(t, "fail", sig.BodyHash)
	require.Equal(t, "sender.test", sig.Domain)
	require.True(t, has(rep, "dkim_fail"))
	require.True(t, has(rep, "dkim_signature_failed"))
	// SPF still passes aligned, so DMARC passes.
	require.Equal(t, "pass", rep.Auth.DMARC.Result)
	require.True(t, rep.Auth.DMARC.SPFAligned)
	require.False(t, rep.Auth.DMARC.DKIMAligned)
	// The signature no longer covers the one-click headers.
	require.True(t, has(rep, "one_click_unsigned"))
	require.Less(t, rep.Score, 100)
}

func TestAnalyzeSPFHeloPassMailFromFail(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	rep := analyze(t, r, raw, session("bounce@other.test"))

	require.Equal(t, "fail", string(rep.Auth.SPF.Status))
	require.Equal(t, "other.test", rep.Auth.SPF.Domain)
	require.Equal(t, "-all", rep.Auth.SPF.Mechanism)
	require.Equal(t, "pass", string(rep.Auth.HeloSPF.Status))
	require.Equal(t, "mail.sender.test", rep.Auth.HeloSPF.Domain)
	require.True(t, has(rep, "spf_fail"))
	require.False(t, has(rep, "helo_spf"))
	// DKIM keeps DMARC passing.
	require.Equal(t, "pass", rep.Auth.DMARC.Result)
	require.False(t, rep.Auth.DMARC.SPFAligned)
	require.True(t, rep.Auth.DMARC.DKIMAligned)
	require.Equal(t, 75, rep.Score)
}

func TestAnalyzeDMARCUnaligned(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	// Signed by the ESP's domain, MAIL FROM at the ESP: both pass, neither
	// aligns with From: sender.test.
	raw := sign(t, goodMail().bytes(), "esp.test", signedHeaders)
	rep := analyze(t, r, raw, session("bounce@esp.test"))

	require.Equal(t, "pass", string(rep.Auth.SPF.Status))
	require.Equal(t, "pass", rep.Auth.DKIM[0].Result)
	require.Equal(t, "esp.test", rep.Auth.DKIM[0].Domain)
	d := rep.Auth.DMARC
	require.Equal(t, "fail", d.Result)
	require.Equal(t, "sender.test", d.FromDomain)
	require.False(t, d.SPFAligned)
	require.False(t, d.DKIMAligned)
	require.Equal(t, "reject", d.Disposition)
	require.True(t, has(rep, "dmarc_fail"))
	require.False(t, has(rep, "spf_fail"))
	require.False(t, has(rep, "dkim_fail"))
}

func TestAnalyzeContentPlaceholderAndMismatchedLink(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	m := goodMail()
	m.headers[2] = "Subject: Hello {{first_name}}"
	m.body = `--b1
Content-Type: text/plain; charset=utf-8

Welcome to Sender. Confirm your account at https://sender.test/confirm
--b1
Content-Type: text/html; charset=utf-8

<html><body><p>Welcome to Sender. Confirm your account:</p>
<p><a href="https://login.evil.example/confirm">https://www.paypal.com/confirm</a></p>
<p><a href="https://sender.test/help">help center</a> <a href="https://www.sender.test/faq">sender.test/faq</a></p>
<p><a href="https://bit.ly/abc">our offer</a> *|UNSUB|*</p>
<script>alert(1)</script><img src="https://sender.test/x.png">
</body></html>
--b1--
`
	raw := sign(t, m.bytes(), "sender.test", signedHeaders)
	rep := analyze(t, r, raw, session("bounce@sender.test"))

	content := ids(rep)["content"]
	require.Subset(t, content, []string{"content_placeholder", "content_link_mismatch", "content_shortener", "content_script", "content_image_no_alt"})
	for _, f := range section(t, rep, deliverability.SectionContent).Findings {
		switch f.ID {
		case "content_placeholder":
			require.Contains(t, f.Message, "{{first_name}}")
			require.Contains(t, f.Message, "*|UNSUB|*")
		case "content_link_mismatch":
			require.Contains(t, f.Message, "paypal.com")
			require.Contains(t, f.Message, "login.evil.example")
		}
	}
	// Authentication is untouched by the content.
	require.Equal(t, "pass", rep.Auth.DMARC.Result)
	require.Less(t, rep.Score, 70)
}

func TestAnalyzeContentPartsDisagree(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	m := goodMail()
	m.body = `--b1
Content-Type: text/plain; charset=utf-8

Your invoice for November is attached. Payment is due within thirty days.
--b1
Content-Type: text/html; charset=utf-8

<html><body><p>Welcome to Sender. Confirm your account by opening the confirmation page.</p></body></html>
--b1--
`
	rep := analyze(t, r, sign(t, m.bytes(), "sender.test", signedHeaders), session("bounce@sender.test"))
	require.True(t, has(rep, "content_parts_disagree"))

	// An HTML-only message lacks the text alternative; the clean message
	// has neither finding.
	m.headers[len(m.headers)-1] = "Content-Type: text/html; charset=utf-8"
	m.body = "<html><body><p>Only HTML here.</p></body></html>\n"
	rep = analyze(t, r, sign(t, m.bytes(), "sender.test", signedHeaders), session("bounce@sender.test"))
	require.True(t, has(rep, "content_text_missing"))
	require.False(t, has(rep, "content_parts_disagree"))
}

func TestAnalyzeOneClickUnsubscribe(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	s := session("bounce@sender.test")

	missing := goodMail().without("List-Unsubscribe", "List-Unsubscribe-Post")
	rep := analyze(t, r, sign(t, missing.bytes(), "sender.test", signedHeaders), s)
	require.Equal(t, []string{"list_unsubscribe_missing", "one_click_missing"}, ids(rep)["headers"])

	mailtoOnly := goodMail()
	mailtoOnly.headers[6] = "List-Unsubscribe: <mailto:unsub@sender.test>"
	rep = analyze(t, r, sign(t, mailtoOnly.bytes(), "sender.test", signedHeaders), s)
	require.Equal(t, []string{"list_unsubscribe_no_https"}, ids(rep)["headers"])

	// Both headers present, but the signature does not cover them.
	unsigned := sign(t, goodMail().bytes(), "sender.test", []string{"From", "To", "Subject", "Date", "Message-ID"})
	rep = analyze(t, r, unsigned, s)
	require.Equal(t, []string{"one_click_unsigned"}, ids(rep)["headers"])
	require.Equal(t, "pass", rep.Auth.DKIM[0].Result)
	require.NotContains(t, rep.Auth.DKIM[0].SignedHeaders, "list-unsubscribe")
}

func TestAnalyzeHeaders(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	s := session("bounce@sender.test")
	m := goodMail().without("Message-ID", "MIME-Version")
	m.headers = append(m.headers, "From: Other <other@sender.test>")
	m.headers[3] = "Date: yesterday"
	m.headers[2] = "Subject: Re: your order"
	rep := analyze(t, r, m.bytes(), s)
	require.Subset(t, ids(rep)["headers"], []string{"from_multiple", "message_id_missing", "date_invalid", "mime_version_missing", "reply_without_thread"})
	// Two From headers leave DMARC without a domain.
	require.Equal(t, "none", rep.Auth.DMARC.Result)

	m.headers = append(m.headers[:len(m.headers)-1], "In-Reply-To: <order-1@shop.test>")
	rep = analyze(t, r, m.bytes(), s)
	require.NotContains(t, ids(rep)["headers"], "reply_without_thread")
	require.NotContains(t, ids(rep)["headers"], "from_multiple")
}

func TestAnalyzeSessionFacts(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)

	// No TLS, and a client without PTR record: MAIL FROM fails SPF too.
	s := session("bounce@sender.test")
	s.ClientIP = netip.MustParseAddr("127.0.0.2")
	s.TLSVersion, s.TLSCipher = "", ""
	rep := analyze(t, r, raw, s)
	require.Equal(t, "fail", rep.Auth.ReverseDNS.Result)
	require.True(t, has(rep, "fcrdns_fail"))
	require.True(t, has(rep, "tls_none"))
	require.True(t, has(rep, "spf_fail"))
	require.True(t, has(rep, "helo_spf"))

	// A weak key and p=none.
	weak := goodMail()
	weak.headers[0] = "From: News <news@weak.test>"
	rep = analyze(t, r, sign(t, weak.bytes(), "weak.test", signedHeaders), session("bounce@weak.test"))
	require.Equal(t, 1024, rep.Auth.DKIM[0].KeyBits)
	require.True(t, has(rep, "dkim_weak_key"))
	require.True(t, has(rep, "dmarc_policy_none"))
	require.Equal(t, "pass", rep.Auth.DMARC.Result)
}

func TestAnalyzeUnsignedAndARC(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	m := goodMail()
	m.headers = append([]string{
		"ARC-Seal: i=2; a=rsa-sha256; cv=pass; d=fwd.test; s=arc; b=AAAA",
		"ARC-Seal: i=1; a=rsa-sha256; cv=none; d=fwd.test; s=arc; b=AAAA",
	}, m.headers...)
	rep := analyze(t, r, m.bytes(), session("bounce@sender.test"))
	require.Empty(t, rep.Auth.DKIM)
	require.True(t, has(rep, "dkim_none"))
	require.True(t, has(rep, "one_click_unsigned"))
	require.True(t, rep.Auth.ARC.Present)
	require.Equal(t, 2, rep.Auth.ARC.Sets)
	require.Equal(t, "present, unverified", rep.Auth.ARC.Result)
	require.True(t, has(rep, "arc_unverified"))
}

func TestAnalyzeReputation(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	ctx := context.Background()
	public := session("bounce@sender.test")
	public.ClientIP = netip.MustParseAddr("192.0.2.10")
	analyze := func(s deliverability.Session, check deliverability.ReputationFunc) *deliverability.Report {
		return deliverability.Analyze(ctx, r, raw, s, deliverability.Options{Reputation: check})
	}

	var asked []netip.Addr
	result := func(res deliverability.ReputationResult, err error) deliverability.ReputationFunc {
		return func(_ context.Context, ip netip.Addr) (deliverability.ReputationResult, error) {
			asked = append(asked, ip)
			return res, err
		}
	}
	clean := analyze(public, result(deliverability.ReputationResult{Checked: 3}, nil))
	require.Empty(t, ids(clean)["reputation"])
	require.Equal(t, []netip.Addr{public.ClientIP}, asked)

	abuse := deliverability.Listing{List: "bl.example", Detail: "127.0.0.2"}
	rep := analyze(public, result(deliverability.ReputationResult{Listings: []deliverability.Listing{abuse}, Checked: 3}, nil))
	require.False(t, section(t, rep, "reputation").Skipped)
	require.Equal(t, []string{"ip_listed"}, ids(rep)["reputation"])
	require.Equal(t, []deliverability.Listing{abuse}, rep.Listings)
	require.Equal(t, clean.Score-30, rep.Score)

	// A policy listing is a warning, not an abuse listing.
	policy := deliverability.Listing{List: "pbl.example", Detail: "127.0.0.10", Informational: true}
	rep = analyze(public, result(deliverability.ReputationResult{Listings: []deliverability.Listing{policy}, Checked: 3}, nil))
	require.Equal(t, []string{"ip_listed_policy"}, ids(rep)["reputation"])
	require.Equal(t, clean.Score-5, rep.Score)

	// Lists that did not answer are named; the others' verdict stands.
	rep = analyze(public, result(deliverability.ReputationResult{Checked: 2, Unchecked: []string{"slow.example"}}, nil))
	require.Equal(t, []string{"reputation_partial"}, ids(rep)["reputation"])
	require.Contains(t, section(t, rep, "reputation").Note, "slow.example")
	require.False(t, section(t, rep, "reputation").Skipped)

	// No list answered, or the check failed: unknown, skipped.
	for _, check := range []deliverability.ReputationFunc{
		result(deliverability.ReputationResult{Unchecked: []string{"a.example", "b.example"}}, nil),
		result(deliverability.ReputationResult{}, errors.New("list timed out")),
	} {
		rep = analyze(public, check)
		require.True(t, section(t, rep, "reputation").Skipped)
		require.Equal(t, []string{"reputation_error"}, ids(rep)["reputation"])
	}

	// A loopback client is on no public list and is not looked up.
	asked = nil
	rep = analyze(session("bounce@sender.test"), result(deliverability.ReputationResult{Listings: []deliverability.Listing{abuse}, Checked: 1}, nil))
	require.Empty(t, asked)
	require.Equal(t, []string{"reputation_not_public"}, ids(rep)["reputation"])
	require.Empty(t, rep.Listings)
	require.Equal(t, "A", rep.Grade)
}

// TestGradeFallsWithEachProblem checks the direction of the grade: each
// added problem lowers the score, and enough of them reach F.
func TestGradeFallsWithEachProblem(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	s := session("bounce@sender.test")
	good := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	bodyChanged := bytes.Replace(good, []byte("Thanks, the Sender team."), []byte("Thanks!"), 1)
	noOneClick := sign(t, goodMail().without("List-Unsubscribe", "List-Unsubscribe-Post").bytes(), "sender.test", signedHeaders)
	unsignedNoOneClick := goodMail().without("List-Unsubscribe", "List-Unsubscribe-Post").bytes()
	spam := goodMail().without("List-Unsubscribe", "List-Unsubscribe-Post", "Message-ID")
	spam.headers[2] = "Subject: Re: {{subject}}"
	spam.body = strings.Replace(cleanBody, `<a href="https://sender.test/confirm?id=42">`, `<a href="https://bit.ly/x">`, 1)

	scores := []int{
		analyze(t, r, good, s).Score,
		analyze(t, r, noOneClick, s).Score,
		analyze(t, r, unsignedNoOneClick, s).Score,
		analyze(t, r, spam.bytes(), s).Score,
	}
	bad := analyze(t, r, spam.bytes(), session("bounce@other.test"))
	scores = append(scores, bad.Score)
	for i := 1; i < len(scores); i++ {
		require.Less(t, scores[i], scores[i-1], "scores %v", scores)
	}
	require.Equal(t, "F", bad.Grade)
	require.Less(t, analyze(t, r, bodyChanged, s).Score, scores[0])
}

func TestAnalyzeBounds(t *testing.T) {
	t.Parallel()
	srv, r := setup(t)
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	ctx := context.Background()
	s := session("bounce@sender.test")

	// A budget of 2 queries: the SPF record and the HELO's, then every
	// later lookup is a temperror, never a missing record.
	before := srv.Queries()
	rep := deliverability.Analyze(ctx, r, raw, s, deliverability.Options{Limits: deliverability.Limits{MaxDNSLookups: 2}})
	require.Equal(t, 2, rep.DNSLookups)
	require.LessOrEqual(t, srv.Queries()-before, int64(2))
	require.Equal(t, "temperror", rep.Auth.DMARC.Result)
	require.Equal(t, "temperror", rep.Auth.DKIM[0].Result)
	require.Equal(t, "temperror", rep.Auth.ReverseDNS.Result)

	// Over the size limit: headers and session only.
	rep = deliverability.Analyze(ctx, r, raw, s, deliverability.Options{Limits: deliverability.Limits{MaxMessageBytes: 100}})
	require.True(t, rep.Sections[4].Skipped)
	require.Equal(t, deliverability.SectionContent, rep.Sections[4].Name)
	require.Equal(t, []string{"message_too_large"}, ids(rep)["content"])
	require.Equal(t, "neutral", rep.Auth.DKIM[0].Result)

	// Nesting deeper than allowed: the body is not read.
	deep := goodMail()
	deep.body = ""
	for i := range 30 {
		deep.body += fmt.Sprintf("--b%d\r\nContent-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n", i+1, i+2)
	}
	rep = deliverability.Analyze(ctx, r, deep.bytes(), s, deliverability.Options{})
	require.Equal(t, []string{"message_unparsable"}, ids(rep)["content"], "%+v", section(t, rep, deliverability.SectionContent))

	// Header fields past the limit are not examined.
	many := goodMail()
	for i := range 20 {
		many.headers = append(many.headers, fmt.Sprintf("X-Filler-%d: x", i))
	}
	rep = deliverability.Analyze(ctx, r, many.bytes(), s, deliverability.Options{Limits: deliverability.Limits{MaxHeaders: 10}})
	require.Contains(t, ids(rep)["headers"], "headers_over_limit")

	// HTML tokens past the limit are not examined: the script at the end
	// is not seen.
	long := goodMail()
	long.body = strings.Replace(cleanBody, "</body>", strings.Repeat("<p>x</p>", 100)+"<script>1</script></body>", 1)
	rep = deliverability.Analyze(ctx, r, long.bytes(), s, deliverability.Options{Limits: deliverability.Limits{MaxHTMLTokens: 50}})
	require.Contains(t, ids(rep)["content"], "content_over_limit")
	require.NotContains(t, ids(rep)["content"], "content_script")
}

func TestAnalyzeCancelled(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	rep := deliverability.Analyze(ctx, r, raw, session("bounce@sender.test"), deliverability.Options{})
	// Unknown is never reported as missing.
	require.Equal(t, "temperror", string(rep.Auth.SPF.Status))
	require.Equal(t, "temperror", rep.Auth.DMARC.Result)
	require.False(t, has(rep, "spf_none"))
	require.False(t, has(rep, "dmarc_none"))
}

func TestAnalyzeDKIMSignatureCap(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	raw := goodMail().bytes()
	for range 7 {
		raw = sign(t, raw, "sender.test", signedHeaders)
	}
	rep := deliverability.Analyze(context.Background(), r, raw, session("bounce@sender.test"), deliverability.Options{Limits: deliverability.Limits{MaxDKIMSignatures: 5}})
	require.Len(t, rep.Auth.DKIM, 7)
	results := map[string]int{}
	for _, s := range rep.Auth.DKIM {
		results[s.Result]++
	}
	require.Equal(t, map[string]int{"pass": 5, "policy": 2}, results)
	require.False(t, has(rep, "dkim_fail"))
}

func TestAnalyzeEmptySession(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	rep := deliverability.Analyze(context.Background(), r, raw, deliverability.Session{}, deliverability.Options{})
	require.Equal(t, "none", string(rep.Auth.SPF.Status))
	require.Equal(t, "fail", rep.Auth.ReverseDNS.Result)
	require.Equal(t, "pass", rep.Auth.DKIM[0].Result)
	require.Equal(t, "pass", rep.Auth.DMARC.Result)
	require.True(t, has(rep, "spf_none"))
	require.True(t, has(rep, "tls_none"))
}

func TestAnalyzeBareLineFeeds(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	// A signed message whose CRs were lost on the way (saved to a file,
	// posted to the ingress webhook) still verifies.
	raw := sign(t, goodMail().bytes(), "sender.test", signedHeaders)
	lf := bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	rep := analyze(t, r, lf, session("bounce@sender.test"))
	require.Equal(t, "pass", rep.Auth.DKIM[0].Result, rep.Auth.DKIM[0].Error)
	require.Equal(t, 100, rep.Score)

	// Changed after signing, it still fails.
	changed := bytes.Replace(lf, []byte("Thanks, the Sender team."), []byte("Thanks!"), 1)
	rep = analyze(t, r, changed, session("bounce@sender.test"))
	require.Equal(t, "fail", rep.Auth.DKIM[0].BodyHash)
}
