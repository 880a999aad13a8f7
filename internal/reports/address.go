// Package reports is mailwatch's DMARC and TLS-RPT capability: the signed
// reporting addresses reports are sent to, the intake that stores a raw
// report and queues its parsing in one transaction, the parse that applies
// the acceptance rules and writes reports, records and daily per-source
// aggregates, and the reads built on them (sources, guidance).
//
// Parsers of the formats live in the leaf packages dmarcrpt, tlsrpt and arf;
// api/ and jobs/ are adapters over this package.
package reports

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// Kind is what a reporting address receives.
type Kind string

// Kinds of reporting addresses.
const (
	// KindDMARC receives DMARC aggregate (rua) and failure (ruf) reports.
	KindDMARC Kind = "dmarc"
	// KindTLSRPT receives SMTP TLS reports (RFC 8460).
	KindTLSRPT Kind = "tlsrpt"
)

const (
	// addressKeyInfo names the HKDF purpose of the MAC key, so the MAC key
	// is never the encryption key it is derived from.
	addressKeyInfo = "mailwatch reporting address v1"
	// keyIDLen and macLen are the hex lengths of the token's two halves:
	// the secretbox key id (32 bits) and the truncated HMAC-SHA256 (96
	// bits, as HMAC-SHA-256-96 truncations do).
	keyIDLen = 8
	macLen   = 24
)

// ErrBadAddress is returned for a local part that is not a well-formed
// reporting address, was signed by a key no longer in the ring, or whose MAC
// does not match.
var ErrBadAddress = errors.New("not a valid reporting address")

// Signer mints and checks the local parts of reporting addresses:
// "<kind>+<key id><mac>", lower-case hex, where mac is HMAC-SHA256 under a
// key derived (HKDF) from MAILWATCH_SECRET_KEY over (kind, account id,
// domain), truncated to 96 bits. The same inputs always give the same
// address, so re-publishing DNS never churns; rotating MAILWATCH_SECRET_KEY
// gives new addresses while those of the previous keys keep working until
// the key leaves MAILWATCH_SECRET_KEY_PREVIOUS.
type Signer struct {
	Keyring *secretbox.Keyring
	// Domain is INBOUND_DOMAIN, the domain of every reporting address.
	Domain string
}

// LocalPart returns the local part for (kind, account, domain) under the
// key keyID; ok is false when the ring has no such key.
func (s *Signer) LocalPart(kind Kind, keyID string, accountID uuid.UUID, domain string) (string, bool) {
	mac, ok := s.mac(kind, keyID, accountID, domain)
	if !ok {
		return "", false
	}
	return string(kind) + "+" + keyID + mac, true
}

// Current returns the local part under the primary key.
func (s *Signer) Current(kind Kind, accountID uuid.UUID, domain string) string {
	lp, _ := s.LocalPart(kind, s.Keyring.PrimaryKeyID(), accountID, domain)
	return lp
}

// Address returns local@Domain.
func (s *Signer) Address(localPart string) string { return localPart + "@" + s.Domain }

// Token returns the part of a local part after "<kind>+": the value used
// in the TLS-RPT HTTPS ingress path.
func Token(localPart string) string {
	_, token, _ := strings.Cut(localPart, "+")
	return token
}

// Parsed is the syntax of a reporting local part.
type Parsed struct {
	LocalPart string // lower case
	Kind      Kind
	KeyID     string
}

// ParseLocalPart checks the syntax of a local part and that its key is in
// the ring; it does not check the MAC (that needs the account and domain,
// see Verify). Case is ignored: some senders lower-case addresses.
func (s *Signer) ParseLocalPart(local string) (Parsed, error) {
	local = strings.ToLower(local)
	kindStr, token, ok := strings.Cut(local, "+")
	if !ok || len(token) != keyIDLen+macLen || !isHex(token) {
		return Parsed{}, ErrBadAddress
	}
	kind := Kind(kindStr)
	if kind != KindDMARC && kind != KindTLSRPT {
		return Parsed{}, ErrBadAddress
	}
	keyID := token[:keyIDLen]
	if !s.Keyring.Has(keyID) {
		return Parsed{}, ErrBadAddress
	}
	return Parsed{LocalPart: local, Kind: kind, KeyID: keyID}, nil
}

// IsReportingLocalPart reports whether local is shaped like a reporting
// address ("dmarc+..." or "tlsrpt+..."), whether or not it verifies: such
// addresses are never receivers.
func IsReportingLocalPart(local string) bool {
	local = strings.ToLower(local)
	return strings.HasPrefix(local, string(KindDMARC)+"+") || strings.HasPrefix(local, string(KindTLSRPT)+"+")
}

// Verify checks that p's MAC is the one for (account, domain).
func (s *Signer) Verify(p Parsed, accountID uuid.UUID, domain string) error {
	want, ok := s.mac(p.Kind, p.KeyID, accountID, domain)
	if !ok {
		return ErrBadAddress
	}
	got := p.LocalPart[len(p.Kind)+1+keyIDLen:]
	if !hmac.Equal([]byte(want), []byte(got)) {
		return ErrBadAddress
	}
	return nil
}

func (s *Signer) mac(kind Kind, keyID string, accountID uuid.UUID, domain string) (string, bool) {
	key, ok := s.Keyring.Derive(keyID, addressKeyInfo)
	if !ok {
		return "", false
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write(accountID[:])
	h.Write([]byte(strings.ToLower(domain)))
	return hex.EncodeToString(h.Sum(nil))[:macLen], true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
