package mxprobe

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func spkiSHA256(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

func certSHA256(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

func tlsa(port int, host, data string) string {
	return fmt.Sprintf("_%d._tcp.%s. TLSA %s\n", port, host, data)
}

func TestProbeDANE(t *testing.T) {
	t.Parallel()
	dns, r := startDNS(t)
	for _, zone := range []string{"dane.test", "danebad.test", "roll.test", "danese.test", "daneta.test"} {
		dns.Authenticate(zone)
	}
	pki := newTestPKI(t)
	from, until := testNow.AddDate(0, 0, -30), testNow.AddDate(0, 0, 60)

	t.Run("DANE-EE matches, then a wrong hash", func(t *testing.T) {
		cert := pki.leaf(t, []string{"mx.dane.test"}, from, until, false)
		port, rec := startSMTP(t, &cert)
		p := newTestProber(t, r, port, pki.pool)
		require.NoError(t, dns.Add(tlsa(port, "mx.dane.test", "3 1 1 "+strings.ToUpper(spkiSHA256(cert.Leaf)))))

		res := p.Probe(context.Background(), "mx.dane.test", nil)
		require.Equal(t, TLSAPublished, res.TLSA.Status)
		require.Equal(t, []TLSARecord{{Usage: 3, Selector: 1, MatchingType: 1, Data: spkiSHA256(cert.Leaf)}}, res.TLSA.Records)
		require.Equal(t, VerdictOK, res.Verdict, "%+v", res.Problems)
		d := res.Addresses[0].DANE
		require.NotNil(t, d)
		require.Equal(t, DANEMatched, d.Status)
		require.False(t, d.Rollover, "one record: no next key")
		require.True(t, d.Records[0].Matched)

		// The record changes to a hash of nothing presented.
		require.NoError(t, dns.Set(tlsa(port, "mx.dane.test", "3 1 1 "+strings.Repeat("ab", 32))))
		res = p.Probe(context.Background(), "mx.dane.test", nil)
		require.Equal(t, VerdictTLSFailing, res.Verdict)
		require.Equal(t, []Code{CodeDANEMismatch}, codes(res.Problems))
		require.Equal(t, DANEMismatch, res.Addresses[0].DANE.Status)
		require.True(t, res.Addresses[0].TLS.Verified, "PKIX is fine; DANE senders still fail")
		assertNoMail(t, rec)
	})

	t.Run("rollover record pre-published", func(t *testing.T) {
		cert := pki.leaf(t, []string{"mx.roll.test"}, from, until, false)
		next := pki.leaf(t, []string{"mx.roll.test"}, from, until, false)
		port, _ := startSMTP(t, &cert)
		require.NoError(t, dns.Add(tlsa(port, "mx.roll.test", "3 1 1 "+spkiSHA256(cert.Leaf))+
			tlsa(port, "mx.roll.test", "3 1 1 "+spkiSHA256(next.Leaf))))
		res := newTestProber(t, r, port, pki.pool).Probe(context.Background(), "mx.roll.test", nil)
		require.Equal(t, VerdictOK, res.Verdict)
		d := res.Addresses[0].DANE
		require.Equal(t, DANEMatched, d.Status)
		require.True(t, d.Rollover)
		require.Len(t, d.Records, 2)
	})

	t.Run("DANE-EE skips name and expiry checks", func(t *testing.T) {
		// Self-signed, for another name, expired: DANE-EE senders accept
		// it (RFC 7672 section 3.1.1); MTA-STS senders do not.
		cert := selfSigned(t, []string{"other.example"}, testNow.AddDate(-1, 0, 0), testNow.AddDate(0, 0, -2))
		port, _ := startSMTP(t, &cert)
		require.NoError(t, dns.Add(tlsa(port, "mx.danese.test", "3 0 1 "+certSHA256(cert.Leaf))+
			tlsa(port, "mx.danese.test", "1 1 1 "+spkiSHA256(cert.Leaf))))
		res := newTestProber(t, r, port, nil).Probe(context.Background(), "mx.danese.test", []string{"mx.danese.test"})
		require.Equal(t, VerdictOK, res.Verdict, "%+v", res.Problems)
		a := res.Addresses[0]
		require.Empty(t, a.Problems)
		require.ElementsMatch(t, []Code{CodeCertificateExpired, CodeCertificateSelfSigned, CodeNameMismatch}, codes(a.Notes))
		require.Equal(t, DANEMatched, a.DANE.Status)
		require.False(t, a.DANE.Records[1].Usable, "PKIX-EE is not used by SMTP")
		require.False(t, a.DANE.Rollover, "an unusable record is not a next key")
		require.Equal(t, -2, a.TLS.DaysLeft)

		safe, reasons := SafeToEnforce([]HostResult{res}, []string{"mx.danese.test"})
		require.False(t, safe)
		require.Len(t, reasons, 3)
	})

	t.Run("DANE-TA anchors the chain and checks the name", func(t *testing.T) {
		good := pki.leaf(t, []string{"mx.daneta.test"}, from, until, true)
		port, _ := startSMTP(t, &good)
		require.NoError(t, dns.Add(tlsa(port, "mx.daneta.test", "2 0 1 "+certSHA256(pki.cert))))
		// No extra roots: trust comes from DANE only.
		p := newTestProber(t, r, port, nil)
		res := p.Probe(context.Background(), "mx.daneta.test", nil)
		require.Equal(t, VerdictOK, res.Verdict, "%+v", res.Problems)
		require.Equal(t, DANEMatched, res.Addresses[0].DANE.Status)
		require.Equal(t, []Code{CodeCertificateUntrusted}, codes(res.Addresses[0].Notes))

		misnamed := pki.leaf(t, []string{"mail.elsewhere.test"}, from, until, true)
		port2, _ := startSMTP(t, &misnamed)
		require.NoError(t, dns.Add(tlsa(port2, "mx.daneta.test", "2 0 1 "+certSHA256(pki.cert))))
		res = newTestProber(t, r, port2, nil).Probe(context.Background(), "mx.daneta.test", nil)
		require.Equal(t, VerdictTLSFailing, res.Verdict)
		d := res.Addresses[0].DANE
		require.Equal(t, DANEMismatch, d.Status)
		require.Contains(t, d.Records[0].Detail, "does not verify")
	})

	t.Run("unsigned TLSA is not DANE", func(t *testing.T) {
		cert := pki.leaf(t, []string{"mx.unsigned.test"}, from, until, false)
		port, _ := startSMTP(t, &cert)
		require.NoError(t, dns.Add(tlsa(port, "mx.unsigned.test", "3 1 1 "+strings.Repeat("cd", 32))))
		res := newTestProber(t, r, port, pki.pool).Probe(context.Background(), "mx.unsigned.test", nil)
		require.Equal(t, TLSAUnsigned, res.TLSA.Status)
		require.False(t, res.TLSA.Published())
		require.Nil(t, res.Addresses[0].DANE)
		require.Equal(t, VerdictOK, res.Verdict)
	})

	t.Run("DANE published but no TLS", func(t *testing.T) {
		port, _ := startSMTP(t, nil)
		require.NoError(t, dns.Add(tlsa(port, "mx.dane.test", "3 1 1 "+strings.Repeat("ef", 32))))
		res := newTestProber(t, r, port, nil).Probe(context.Background(), "mx.dane.test", nil)
		require.Equal(t, VerdictTLSFailing, res.Verdict)
		require.Equal(t, DANENoTLS, res.Addresses[0].DANE.Status)
		require.Equal(t, []Code{CodeStartTLSNotOffered}, codes(res.Problems))
	})

	t.Run("TLSA lookup failure is temporary", func(t *testing.T) {
		cert := pki.leaf(t, []string{"mx.pkix.test"}, from, until, false)
		port, _ := startSMTP(t, &cert)
		dns.ServFail(fmt.Sprintf("_%d._tcp.mx.pkix.test", port))
		res := newTestProber(t, r, port, pki.pool).Probe(context.Background(), "mx.pkix.test", nil)
		require.Equal(t, TLSATemporary, res.TLSA.Status)
		require.Equal(t, VerdictTemporary, res.Verdict)
		require.Equal(t, []Code{CodeDNSTemporary}, codes(res.Problems))
	})
}

func TestMatchDANERecords(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	cert := pki.leaf(t, []string{"mx.example.test"}, testNow.AddDate(0, 0, -1), testNow.AddDate(0, 0, 1), true)
	chain := []*x509.Certificate{cert.Leaf, pki.cert}
	full := hex.EncodeToString(cert.Leaf.Raw)
	spki512 := sha512.Sum512(cert.Leaf.RawSubjectPublicKeyInfo)
	for _, tc := range []struct {
		rec     TLSARecord
		usable  bool
		matched bool
	}{
		{TLSARecord{3, 0, 0, full}, true, true},
		{TLSARecord{3, 1, 2, hex.EncodeToString(spki512[:])}, true, true},
		{TLSARecord{3, 1, 1, spkiSHA256(pki.cert)}, true, false}, // EE never matches the issuer
		{TLSARecord{2, 1, 1, spkiSHA256(pki.cert)}, true, true},
		{TLSARecord{2, 0, 0, hex.EncodeToString(pki.cert.Raw)}, true, true},
		{TLSARecord{0, 0, 1, certSHA256(pki.cert)}, false, false},
		{TLSARecord{3, 2, 1, spkiSHA256(cert.Leaf)}, false, false},
		{TLSARecord{3, 1, 3, spkiSHA256(cert.Leaf)}, false, false},
	} {
		res := matchDANE([]TLSARecord{tc.rec}, chain, "mx.example.test", testNow)
		require.Equal(t, tc.usable, res.Records[0].Usable, tc.rec.String())
		require.Equal(t, tc.matched, res.Records[0].Matched, tc.rec.String())
		switch {
		case !tc.usable:
			require.Equal(t, DANEUnusable, res.Status)
		case tc.matched:
			require.Equal(t, DANEMatched, res.Status)
		default:
			require.Equal(t, DANEMismatch, res.Status)
		}
	}
	// DANE-TA verifies validity at the injected clock.
	res := matchDANE([]TLSARecord{{2, 1, 1, spkiSHA256(pki.cert)}}, chain, "mx.example.test", testNow.AddDate(0, 0, 2))
	require.Equal(t, DANEMismatch, res.Status)
}
