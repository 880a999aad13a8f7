package deliverability

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/mjl-/mox/dkim"
	moxdns "github.com/mjl-/mox/dns"

	"github.com/mailwatch/mailwatch/internal/domainname"
)

// Signing test mail: what a team needs to send a DKIM-signed message to a
// receiver and read how the analysis judges it, without a mail server.

// SignedHeaders are the header fields a test signature covers, including
// the two that RFC 8058 one-click unsubscription needs covered. A field
// the message lacks is signed as absent, so it cannot be added later.
var SignedHeaders = []string{"From", "To", "Cc", "Reply-To", "Subject", "Date", "Message-ID", "MIME-Version",
	"Content-Type", "Content-Transfer-Encoding", "List-Unsubscribe", "List-Unsubscribe-Post"}

// selectorRE is a DKIM selector: dot-separated LDH labels (RFC 6376 3.1).
var selectorRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// maxSignInput bounds the message Sign reads.
const maxSignInput = 10 << 20

// NewSigningKey makes a 2048-bit RSA key and returns it PEM-encoded
// (PKCS #8), with the DKIM TXT record value that publishes its public half.
func NewSigningKey() (keyPEM []byte, record string, err error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, "", fmt.Errorf("generating an RSA key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, "", fmt.Errorf("encoding the key: %w", err)
	}
	record, err = DKIMRecord(k.Public())
	if err != nil {
		return nil, "", err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), record, nil
}

// DKIMRecord is the TXT record value (RFC 6376 section 3.6.1) that
// publishes pub, an RSA or Ed25519 public key.
func DKIMRecord(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return "", fmt.Errorf("encoding the public key: %w", err)
		}
		return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der), nil
	case ed25519.PublicKey:
		return "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(k), nil
	}
	return "", fmt.Errorf("a DKIM key is RSA or Ed25519, not %T", pub)
}

// ParseSigningKey reads a PEM private key: PKCS #8 (RSA or Ed25519) or
// PKCS #1 (RSA).
func ParseSigningKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block in the key file")
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("reading the RSA key: %w", err)
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("reading the key: %w", err)
		}
		switch k := k.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case ed25519.PrivateKey:
			return k, nil
		}
		return nil, fmt.Errorf("a DKIM key is RSA or Ed25519, not %T", k)
	}
	return nil, fmt.Errorf("unexpected PEM block %q (want PRIVATE KEY or RSA PRIVATE KEY)", block.Type)
}

// Sign returns msg with a DKIM-Signature (relaxed/relaxed, SHA-256) of
// domain's selector prepended. A message with only bare LF line ends is
// made CRLF first (as the analysis reads it), so a message typed in a
// shell signs and travels the same.
func Sign(ctx context.Context, msg []byte, domain, selector string, key crypto.Signer) ([]byte, error) {
	if len(selector) > 253 {
		return nil, errors.New("the selector is over 253 characters")
	}
	if len(msg) > maxSignInput {
		return nil, fmt.Errorf("the message is over %d MiB", maxSignInput>>20)
	}
	d, err := domainname.Normalize(domain)
	if err != nil {
		return nil, fmt.Errorf("signing domain: %w", err)
	}
	if !selectorRE.MatchString(selector) {
		return nil, fmt.Errorf("selector %q: use letters, digits and hyphens (dot-separated labels of at most 63)", selector)
	}
	msg = crlf(msg)
	sel := dkim.Selector{Hash: "sha256", HeaderRelaxed: true, BodyRelaxed: true, Headers: SignedHeaders,
		PrivateKey: key, Domain: moxdns.Domain{ASCII: selector}}
	h, err := dkim.Sign(ctx, slog.New(slog.DiscardHandler), "", moxdns.Domain{ASCII: d}, []dkim.Selector{sel}, false, bytes.NewReader(msg))
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return append([]byte(h), msg...), nil
}
