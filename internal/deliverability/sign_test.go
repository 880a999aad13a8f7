package deliverability_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// A message typed with LF line ends, signed with a new key whose record is
// published, passes DKIM in the analysis with the one-click headers covered;
// changed after signing, it fails.
func TestSignRoundTrip(t *testing.T) {
	t.Parallel()
	keyPEM, record, err := deliverability.NewSigningKey()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(record, "v=DKIM1; k=rsa; p="))
	key, err := deliverability.ParseSigningKey(keyPEM)
	require.NoError(t, err)

	var quoted []string
	for txt := record; txt != ""; {
		n := min(len(txt), 200)
		quoted = append(quoted, `"`+txt[:n]+`"`)
		txt = txt[n:]
	}
	srv := dnstest.Start(t, "s1._domainkey.signer.test. TXT "+strings.Join(quoted, " ")+"\n")
	r := dnscheck.NewClient(srv.Addr(), 2*time.Second)

	msg := "From: QA <qa@signer.test>\nTo: inbox@receiver.test\nSubject: hello\n" +
		"List-Unsubscribe: <https://signer.test/u>\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\n\nHi.\n"
	signed, err := deliverability.Sign(context.Background(), []byte(msg), "Signer.Test", "s1", key)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(signed), "DKIM-Signature:"))
	require.NotContains(t, strings.ReplaceAll(string(signed), "\r\n", ""), "\n", "every line end is CRLF")

	rep := deliverability.Analyze(context.Background(), r, signed, session("qa@signer.test"), deliverability.Options{})
	require.Len(t, rep.Auth.DKIM, 1)
	sig := rep.Auth.DKIM[0]
	require.Equal(t, "pass", sig.Result, sig.Error)
	require.Equal(t, "signer.test", sig.Domain)
	require.Equal(t, 2048, sig.KeyBits)
	require.Contains(t, sig.SignedHeaders, "list-unsubscribe-post")

	tampered := strings.Replace(string(signed), "Hi.", "Hi!", 1)
	rep = deliverability.Analyze(context.Background(), r, []byte(tampered), session("qa@signer.test"), deliverability.Options{})
	require.Equal(t, "fail", rep.Auth.DKIM[0].Result)
}

func TestSignRefuses(t *testing.T) {
	t.Parallel()
	_, rsaKey := mustRSA(t)
	ctx := context.Background()
	_, err := deliverability.Sign(ctx, []byte("Subject: no from\r\n\r\nx\r\n"), "signer.test", "s1", rsaKey)
	require.ErrorContains(t, err, "from")
	_, err = deliverability.Sign(ctx, []byte("From: a@signer.test\r\n\r\nx\r\n"), "signer.test", "bad_selector", rsaKey)
	require.ErrorContains(t, err, "selector")
	_, err = deliverability.Sign(ctx, []byte("From: a@signer.test\r\n\r\nx\r\n"), "com", "s1", rsaKey)
	require.ErrorContains(t, err, "signing domain")
}

func TestParseSigningKey(t *testing.T) {
	t.Parallel()
	pkcs1, _ := mustRSA(t)
	k, err := deliverability.ParseSigningKey(pkcs1)
	require.NoError(t, err)
	require.IsType(t, &rsa.PrivateKey{}, k)

	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(edKey)
	require.NoError(t, err)
	k, err = deliverability.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	require.NoError(t, err)
	record, err := deliverability.DKIMRecord(k.Public())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(record, "v=DKIM1; k=ed25519; p="))

	for in, want := range map[string]string{
		"not a key": "no PEM block",
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})): "unexpected PEM block",
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})): "reading the key",
	} {
		_, err := deliverability.ParseSigningKey([]byte(in))
		require.ErrorContains(t, err, want)
	}
}

func mustRSA(t *testing.T) ([]byte, *rsa.PrivateKey) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), k
}
