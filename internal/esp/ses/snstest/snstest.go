// Package snstest stands in for Amazon SNS in tests: a loopback HTTPS server
// that answers as sns.<region>.amazonaws.com (with a certificate from a CA
// the test makes), serves a signing certificate, records subscription
// confirmations, and signs envelopes the way SNS does.
package snstest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailwatch/mailwatch/internal/esp/ses"
)

// Region is the region the fake SNS answers for.
const Region = "us-east-1"

// Host is the fake SNS host name.
const Host = "sns." + Region + ".amazonaws.com"

// CertPath is where the signing certificate is served.
const CertPath = "/SimpleNotificationService-test.pem"

// Server is a fake SNS.
type Server struct {
	srv     *httptest.Server
	key     *rsa.PrivateKey
	certPEM []byte
	pool    *x509.CertPool

	mu        sync.Mutex
	confirmed []string
	certHits  int
}

// New starts a fake SNS; it stops at the end of the test.
func New(t testing.TB) *Server {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "snstest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	caCert, err := x509.ParseCertificate(caDER)
	must(err)
	tlsKey, err := rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	tlsTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: Host}, DNSNames: []string{Host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	tlsDER, err := x509.CreateCertificate(rand.Reader, tlsTmpl, caCert, &tlsKey.PublicKey, caKey)
	must(err)
	signKey, err := rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	signTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
	}
	signDER, err := x509.CreateCertificate(rand.Reader, signTmpl, caCert, &signKey.PublicKey, caKey)
	must(err)

	s := &Server{key: signKey, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: signDER})}
	s.pool = x509.NewCertPool()
	s.pool.AddCert(caCert)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{tlsDER}, PrivateKey: tlsKey}}, MinVersion: tls.VersionTLS12}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.URL.Path == CertPath:
		s.certHits++
		_, _ = w.Write(s.certPEM)
	case r.URL.Query().Get("Action") == "ConfirmSubscription":
		s.confirmed = append(s.confirmed, r.URL.Query().Get("Token"))
		_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
	default:
		http.NotFound(w, r)
	}
}

// Client returns an HTTP client that reaches the fake SNS for any
// sns.*.amazonaws.com URL and trusts its certificate. Other hosts are
// dialled normally (and fail certificate checks).
func (s *Server) Client() *http.Client {
	addr := s.srv.Listener.Addr().String()
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, hostport string) (net.Conn, error) {
				if strings.HasSuffix(strings.Split(hostport, ":")[0], ".amazonaws.com") {
					hostport = addr
				}
				return d.DialContext(ctx, network, hostport)
			},
			TLSClientConfig: &tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Confirmed returns the tokens of the subscriptions confirmed so far.
func (s *Server) Confirmed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.confirmed...)
}

// CertFetches counts requests for the signing certificate.
func (s *Server) CertFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.certHits
}

// Sign sets env's SigningCertURL, SignatureVersion and Signature.
func (s *Server) Sign(env *ses.Envelope, version string) {
	env.SigningCertURL = "https://" + Host + CertPath
	env.SignatureVersion = version
	msg := []byte(env.StringToSign())
	var sig []byte
	var err error
	if version == "1" {
		d := sha1.Sum(msg) //nolint:gosec // SignatureVersion 1
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA1, d[:])
	} else {
		d := sha256.Sum256(msg)
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, d[:])
	}
	if err != nil {
		panic(err)
	}
	env.Signature = base64.StdEncoding.EncodeToString(sig)
}

// Notification returns a signed SNS Notification carrying message.
func (s *Server) Notification(topicARN, messageID, message, version string) []byte {
	env := &ses.Envelope{
		Type: ses.TypeNotification, MessageID: messageID, TopicArn: topicARN, Message: message,
		Timestamp:      time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		UnsubscribeURL: "https://" + Host + "/?Action=Unsubscribe",
	}
	env.SetSubject("Amazon SES Email Event Notification")
	s.Sign(env, version)
	return Marshal(env)
}

// SubscriptionConfirmation returns a signed SubscriptionConfirmation.
func (s *Server) SubscriptionConfirmation(topicARN, token string) []byte {
	env := &ses.Envelope{
		Type: ses.TypeSubscriptionConfirmation, MessageID: "confirm-" + token, TopicArn: topicARN, Token: token,
		Message:      "You have chosen to subscribe to the topic " + topicARN,
		SubscribeURL: "https://" + Host + "/?Action=ConfirmSubscription&TopicArn=" + topicARN + "&Token=" + token,
		Timestamp:    time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
	}
	s.Sign(env, "1")
	return Marshal(env)
}

// Marshal encodes env as SNS sends it (Subject only when set).
func Marshal(env *ses.Envelope) []byte {
	m := map[string]string{
		"Type": env.Type, "MessageId": env.MessageID, "TopicArn": env.TopicArn, "Message": env.Message,
		"Timestamp": env.Timestamp, "SignatureVersion": env.SignatureVersion, "Signature": env.Signature,
		"SigningCertURL": env.SigningCertURL,
	}
	if env.Type == ses.TypeNotification {
		if env.Subject != "" {
			m["Subject"] = env.Subject
		}
		m["UnsubscribeURL"] = env.UnsubscribeURL
	} else {
		m["Token"], m["SubscribeURL"] = env.Token, env.SubscribeURL
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}
