package mxprobe

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// maxReportedNames caps the DNS names listed per certificate in results.
const maxReportedNames = 50

// inspectTLS describes a completed handshake and checks its chain the way
// an MTA-STS sender does (RFC 8461 section 4.2): it chains to a trusted
// root, has not expired, and is valid for the MX host name.
//
// The handshake ran with InsecureSkipVerify, and the verification happens
// here instead: crypto/tls would abort the handshake on the first error and
// hide the certificate, while a probe must report what was presented
// (expiry, names, fingerprint) even when it is wrong, and must check
// validity at the injected clock (VerifyOptions.CurrentTime) so tests and
// the days-to-expiry maths agree. Nothing is sent over this connection but
// EHLO and QUIT, so skipping crypto/tls's own check exposes no data.
func inspectTLS(cs tls.ConnectionState, host string, extraRoots *x509.CertPool, now time.Time) (*TLSInfo, []Problem) {
	info := &TLSInfo{
		Version:     tls.VersionName(cs.Version),
		CipherSuite: tls.CipherSuiteName(cs.CipherSuite),
	}
	chain := cs.PeerCertificates
	if len(chain) == 0 {
		return info, []Problem{{Code: CodeHandshakeFailed, Kind: KindTLS, Detail: "the server presented no certificate"}}
	}
	for _, c := range chain {
		info.Chain = append(info.Chain, certInfo(c))
	}
	leaf := chain[0]
	info.NotAfter = leaf.NotAfter
	info.DaysLeft = daysLeft(leaf.NotAfter, now)
	info.Fingerprint = info.Chain[0].Fingerprint

	var problems []Problem
	verr := verifyPKIX(chain, extraRoots, now)
	info.Verified = verr == nil
	if verr != nil {
		info.VerifyError = verr.Error()
		expired := now.After(leaf.NotAfter)
		notYet := now.Before(leaf.NotBefore)
		switch {
		case expired:
			problems = append(problems, Problem{Code: CodeCertificateExpired, Kind: KindTLS,
				Detail: fmt.Sprintf("the certificate expired on %s", leaf.NotAfter.UTC().Format(time.RFC3339))})
		case notYet:
			problems = append(problems, Problem{Code: CodeCertificateNotYetValid, Kind: KindTLS,
				Detail: fmt.Sprintf("the certificate is valid from %s", leaf.NotBefore.UTC().Format(time.RFC3339))})
		}
		// crypto/x509 reports the leaf's validity before trust, so to tell
		// an expired certificate from an expired and untrusted one,
		// verify again inside the leaf's validity period.
		trustErr := verr
		if expired || notYet {
			trustErr = verifyPKIX(chain, extraRoots, leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore)/2))
		}
		switch {
		case trustErr == nil:
		case isSelfSigned(leaf):
			problems = append(problems, Problem{Code: CodeCertificateSelfSigned, Kind: KindTLS, Detail: "the certificate is self-signed"})
		default:
			problems = append(problems, Problem{Code: CodeCertificateUntrusted, Kind: KindTLS, Detail: trustErr.Error()})
		}
	}
	if err := leaf.VerifyHostname(host); err == nil {
		info.NameMatches = true
	} else {
		problems = append(problems, Problem{Code: CodeNameMismatch, Kind: KindTLS,
			Detail: fmt.Sprintf("the certificate is for %s, not %s", certNames(leaf), host)})
	}
	return info, problems
}

// verifyPKIX verifies the chain at now against the system roots, then
// against extraRoots. A chain ends in one root, so trying each pool in turn
// is the same as trusting their union (x509.CertPool has no union).
func verifyPKIX(chain []*x509.Certificate, extraRoots *x509.CertPool, now time.Time) error {
	opts := x509.VerifyOptions{Intermediates: x509.NewCertPool(), CurrentTime: now}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(opts)
	if err == nil || extraRoots == nil {
		return err
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		return err
	}
	opts.Roots = extraRoots
	_, err = chain[0].Verify(opts)
	return err
}

// isSelfSigned reports whether c is signed by its own key. It checks the
// signature directly: CheckSignatureFrom would also demand that c be a CA,
// which a self-signed server certificate usually is not.
func isSelfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature) == nil
}

// daysLeft is the number of whole days from now until notAfter, rounded
// down, so a certificate expiring in 5 days and 1 hour has 5 left and one
// expired an hour ago has -1.
func daysLeft(notAfter, now time.Time) int {
	return int(math.Floor(notAfter.Sub(now).Hours() / 24))
}

func certInfo(c *x509.Certificate) CertInfo {
	sum := sha256.Sum256(c.Raw)
	names := c.DNSNames
	if len(names) > maxReportedNames {
		names = names[:maxReportedNames]
	}
	return CertInfo{
		Subject:     cleanText(c.Subject.String()),
		Issuer:      cleanText(c.Issuer.String()),
		DNSNames:    cleanNames(names),
		NotBefore:   c.NotBefore,
		NotAfter:    c.NotAfter,
		Fingerprint: hex.EncodeToString(sum[:]),
	}
}

func cleanNames(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, cleanText(n))
	}
	return out
}

// certNames lists the names a certificate is for, for messages.
func certNames(c *x509.Certificate) string {
	names := c.DNSNames
	if len(names) == 0 && c.Subject.CommonName != "" {
		names = []string{c.Subject.CommonName}
	}
	if len(names) == 0 {
		return "no name"
	}
	if len(names) > 5 {
		names = append(names[:5:5], "...")
	}
	return cleanText(strings.Join(names, ", "))
}
