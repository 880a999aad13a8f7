package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/netguard"
)

// received is one request as the receiver saw it.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTP server on loopback that records requests and
// answers with handler (200 "ok" when nil).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []received
	conns    atomic.Int64
}

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...)
}

func startReceiver(t *testing.T, handler http.HandlerFunc) *receiver {
	t.Helper()
	return startReceiverOn(t, "tcp4", "127.0.0.1:0", false, handler)
}

func startReceiverOn(t *testing.T, network, addr string, useTLS bool, handler http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.requests = append(r.requests, received{header: req.Header.Clone(), body: body})
		r.mu.Unlock()
		if handler == nil {
			_, _ = io.WriteString(w, "ok")
			return
		}
		handler(w, req)
	}))
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("cannot listen on %s %s: %v", network, addr, err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // expected TLS handshake failures
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			r.conns.Add(1)
		}
	}
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	r.Server = srv
	return r
}

type testBundle struct {
	guard  *netguard.Guard
	client *http.Client
	secret string
}

// setup returns a client whose guard admits loopback only: tests never
// reach beyond this machine.
func setup(t *testing.T) *testBundle {
	t.Helper()
	guard, err := netguard.ParseGuard("127.0.0.1/32,::1/128")
	require.NoError(t, err)
	return &testBundle{
		guard:  guard,
		client: NewClient(guard, ClientOptions{}),
		secret: GenerateSecret(),
	}
}

func (b *testBundle) request(url string) Request {
	return Request{
		URL:       url,
		MsgID:     "msg_01JD5Z8Q2W",
		Timestamp: time.Now(),
		Body:      []byte(`{"type":"test","timestamp":"2026-01-01T00:00:00Z","data":{"k":"v"}}`),
		Secret:    b.secret,
	}
}

func verify(t *testing.T, secret string, got received) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(got.body, got.header))
}

func TestSendDelivered(t *testing.T) {
	t.Parallel()

	t.Run("GeneratedSecret", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"received":true}`)
		})

		req := bundle.request(recv.URL + "/hooks?x=1")
		req.Body = []byte("{\"type\":\"test\",  \"data\":{\"s\":\"é\\u00e9<&>\"}}\n")
		attempt := Send(context.Background(), bundle.client, req)

		require.True(t, attempt.Delivered)
		require.Equal(t, http.StatusAccepted, attempt.StatusCode)
		require.Empty(t, attempt.ErrorClass)
		require.Empty(t, attempt.Error)
		require.Equal(t, `{"received":true}`, attempt.ResponseBody)
		require.False(t, attempt.ResponseTruncated)
		require.Positive(t, attempt.Duration)
		require.Zero(t, attempt.RetryAfter)

		got := recv.received()
		require.Len(t, got, 1)
		require.Equal(t, req.Body, got[0].body, "exact bytes")
		require.Equal(t, "msg_01JD5Z8Q2W", got[0].header.Get("webhook-id"))
		require.Equal(t, strconv.FormatInt(req.Timestamp.Unix(), 10), got[0].header.Get("webhook-timestamp"))
		require.True(t, strings.HasPrefix(got[0].header.Get("webhook-signature"), "v1,"))
		require.Equal(t, "application/json", got[0].header.Get("Content-Type"))
		require.Equal(t, "mailwatch", got[0].header.Get("User-Agent"))
		require.Equal(t, strconv.Itoa(len(req.Body)), got[0].header.Get("Content-Length"))
		verify(t, bundle.secret, got[0])
	})

	t.Run("SuppliedSecret", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.secret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("customer-chosen-secret-24b"))
		require.NoError(t, ValidateSecret(bundle.secret))
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

		req := bundle.request(recv.URL)
		req.UserAgent = "mailwatch/1.2.3"
		attempt := Send(context.Background(), bundle.client, req)
		require.True(t, attempt.Delivered, attempt.Error)
		require.Equal(t, http.StatusNoContent, attempt.StatusCode)
		got := recv.received()
		require.Len(t, got, 1)
		verify(t, bundle.secret, got[0])
		require.Equal(t, "mailwatch/1.2.3", got[0].header.Get("User-Agent"))
	})

	t.Run("SameBytesAndIDOnRetry", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, nil)
		req := bundle.request(recv.URL)
		for range 3 {
			req.Timestamp = time.Now()
			require.True(t, Send(context.Background(), bundle.client, req).Delivered)
		}
		got := recv.received()
		require.Len(t, got, 3)
		for _, g := range got {
			require.Equal(t, req.Body, g.body)
			require.Equal(t, req.MsgID, g.header.Get("webhook-id"))
			verify(t, bundle.secret, g)
		}
	})

	t.Run("ZeroTimestampMeansNow", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, nil)
		req := bundle.request(recv.URL)
		req.Timestamp = time.Time{}
		require.True(t, Send(context.Background(), bundle.client, req).Delivered)
		verify(t, bundle.secret, recv.received()[0]) // Verify enforces ±5 min
	})

	t.Run("IPv6Loopback", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiverOn(t, "tcp6", "[::1]:0", false, nil)
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.True(t, attempt.Delivered, attempt.Error)
		verify(t, bundle.secret, recv.received()[0])
	})

	t.Run("TLS", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiverOn(t, "tcp4", "127.0.0.1:0", true, nil)
		client := NewClient(bundle.guard, ClientOptions{
			RootCAs: recv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs,
		})
		attempt := Send(context.Background(), client, bundle.request(recv.URL))
		require.True(t, attempt.Delivered, attempt.Error)
		verify(t, bundle.secret, recv.received()[0])
	})

	t.Run("ConnectionReused", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		big := strings.Repeat("x", 20<<10) // beyond the capture, within the drain
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, big) })
		for range 5 {
			require.True(t, Send(context.Background(), bundle.client, bundle.request(recv.URL)).Delivered)
		}
		require.Equal(t, int64(1), recv.conns.Load(), "one kept-alive connection for sequential pushes")
	})
}

func TestSendFailures(t *testing.T) {
	t.Parallel()

	t.Run("Status500", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "30") // ignored: not 429/503
			http.Error(w, "boom", http.StatusInternalServerError)
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.False(t, attempt.Delivered)
		require.Equal(t, http.StatusInternalServerError, attempt.StatusCode)
		require.Equal(t, ErrorClassHTTPStatus, attempt.ErrorClass)
		require.Equal(t, "endpoint answered 500 Internal Server Error", attempt.Error)
		require.Equal(t, "boom\n", attempt.ResponseBody)
		require.Zero(t, attempt.RetryAfter)
	})

	t.Run("Status410", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.False(t, attempt.Delivered)
		require.Equal(t, http.StatusGone, attempt.StatusCode)
		require.Equal(t, ErrorClassHTTPStatus, attempt.ErrorClass)
		require.Equal(t, "endpoint answered 410 Gone", attempt.Error)
	})

	t.Run("Status429RetryAfterSeconds", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, http.StatusTooManyRequests, attempt.StatusCode)
		require.Equal(t, ErrorClassHTTPStatus, attempt.ErrorClass)
		require.Equal(t, 120*time.Second, attempt.RetryAfter)
	})

	t.Run("Status429RetryAfterDate", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, http.StatusTooManyRequests, attempt.StatusCode)
		require.InDelta(t, time.Hour.Seconds(), attempt.RetryAfter.Seconds(), 5)
	})

	t.Run("Status503RetryAfter", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, http.StatusServiceUnavailable, attempt.StatusCode)
		require.Equal(t, "endpoint answered 503 Service Unavailable", attempt.Error)
		require.Equal(t, 7*time.Second, attempt.RetryAfter)
	})

	t.Run("Status503WithoutRetryAfter", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, ErrorClassHTTPStatus, attempt.ErrorClass)
		require.Zero(t, attempt.RetryAfter)
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		release := make(chan struct{})
		recv := startReceiver(t, func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		t.Cleanup(func() { close(release) }) // runs before recv.Close (LIFO)
		client := NewClient(bundle.guard, ClientOptions{Timeout: 100 * time.Millisecond})
		attempt := Send(context.Background(), client, bundle.request(recv.URL))
		require.False(t, attempt.Delivered)
		require.Zero(t, attempt.StatusCode)
		require.Equal(t, ErrorClassTimeout, attempt.ErrorClass)
		require.Contains(t, attempt.Error, "no complete response within 100ms")
		require.GreaterOrEqual(t, attempt.Duration, 100*time.Millisecond)
	})

	t.Run("ContextDeadline", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		release := make(chan struct{})
		recv := startReceiver(t, func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		t.Cleanup(func() { close(release) })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		attempt := Send(ctx, bundle.client, bundle.request(recv.URL))
		require.Equal(t, ErrorClassTimeout, attempt.ErrorClass)
	})

	t.Run("Canceled", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		attempt := Send(ctx, bundle.client, bundle.request(recv.URL))
		require.Equal(t, ErrorClassCanceled, attempt.ErrorClass)
		require.Empty(t, recv.received())
	})

	t.Run("RedirectNotFollowed", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		var followed atomic.Int64
		recv := startReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				followed.Add(1)
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL+"/hook"))
		require.False(t, attempt.Delivered)
		require.Equal(t, http.StatusTemporaryRedirect, attempt.StatusCode)
		require.Equal(t, ErrorClassRedirect, attempt.ErrorClass)
		require.Equal(t, "endpoint answered 307 Temporary Redirect to /elsewhere; redirects are not followed, update the subscription URL", attempt.Error)
		require.Zero(t, followed.Load())
		require.Len(t, recv.received(), 1)
	})

	t.Run("BlockedWithoutAllowList", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, nil)
		client := NewClient(netguard.NewGuard(nil), ClientOptions{})
		attempt := Send(context.Background(), client, bundle.request(recv.URL))
		require.False(t, attempt.Delivered)
		require.Zero(t, attempt.StatusCode)
		require.Equal(t, ErrorClassBlockedDestination, attempt.ErrorClass)
		require.Contains(t, attempt.Error, "is not allowed: loopback address")
		require.Empty(t, recv.received(), "nothing reached the receiver")
		require.Zero(t, recv.conns.Load(), "not even a connection")
	})

	t.Run("BlockedByNameAndNilGuard", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, nil)
		_, port, err := net.SplitHostPort(recv.Listener.Addr().String())
		require.NoError(t, err)
		attempt := Send(context.Background(), NewClient(nil, ClientOptions{}), bundle.request("http://localhost:"+port+"/"))
		require.Equal(t, ErrorClassBlockedDestination, attempt.ErrorClass, attempt.Error)
		require.Empty(t, recv.received())
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		attempt := Send(context.Background(), bundle.client, bundle.request("http://"+addr+"/"))
		require.Equal(t, ErrorClassConnectionRefused, attempt.ErrorClass, attempt.Error)
		require.NotContains(t, attempt.Error, "Post ", "URL wrapper removed")
	})

	t.Run("ConnectionReset", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, ErrorClassConnectionReset, attempt.ErrorClass, attempt.Error)
	})

	t.Run("DNS", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		client := NewClient(bundle.guard, ClientOptions{Resolver: &net.Resolver{
			PreferGo: true,
			Dial: func(context.Context, string, string) (net.Conn, error) {
				return nil, errors.New("no DNS server in tests")
			},
		}})
		attempt := Send(context.Background(), client, bundle.request("https://hooks.invalid/x"))
		require.Equal(t, ErrorClassDNS, attempt.ErrorClass, attempt.Error)
		require.Contains(t, attempt.Error, "DNS lookup failed")
	})

	t.Run("TLSUnknownAuthority", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiverOn(t, "tcp4", "127.0.0.1:0", true, nil)
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, ErrorClassTLS, attempt.ErrorClass, attempt.Error)
		require.Empty(t, recv.received())
	})

	t.Run("TLSOldVersionRefused", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := &receiver{}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.TLS = &tls.Config{MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		recv.Server = srv
		client := NewClient(bundle.guard, ClientOptions{
			RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs,
		})
		attempt := Send(context.Background(), client, bundle.request(srv.URL))
		require.Equal(t, ErrorClassTLS, attempt.ErrorClass, attempt.Error)
	})

	t.Run("InvalidRequest", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		req := bundle.request("ftp://127.0.0.1/")
		require.Equal(t, ErrorClassInvalidRequest, Send(context.Background(), bundle.client, req).ErrorClass)
		req = bundle.request("http://127.0.0.1/%zz")
		require.Equal(t, ErrorClassInvalidRequest, Send(context.Background(), bundle.client, req).ErrorClass)
		req = bundle.request("http://127.0.0.1/")
		req.Secret = "not-a-secret"
		attempt := Send(context.Background(), bundle.client, req)
		require.Equal(t, ErrorClassInvalidRequest, attempt.ErrorClass)
		require.Contains(t, attempt.Error, "error signing: invalid signing secret")
	})
}

func TestSendResponseBody(t *testing.T) {
	t.Parallel()

	t.Run("Truncated", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		big := strings.Repeat("0123456789", 1000) // 10,000 bytes
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, big)
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, ErrorClassHTTPStatus, attempt.ErrorClass)
		require.Len(t, attempt.ResponseBody, MaxResponseBody)
		require.Equal(t, big[:MaxResponseBody], attempt.ResponseBody)
		require.True(t, attempt.ResponseTruncated)
	})

	t.Run("ExactlyAtBound", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		body := strings.Repeat("a", MaxResponseBody)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, body, attempt.ResponseBody)
		require.False(t, attempt.ResponseTruncated)
	})

	t.Run("MultiByteBoundary", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		body := "x" + strings.Repeat("é", MaxResponseBody) // the bound falls inside an "é"
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.True(t, utf8.ValidString(attempt.ResponseBody))
		require.Len(t, attempt.ResponseBody, MaxResponseBody-1)
		require.True(t, strings.HasPrefix(body, attempt.ResponseBody))
		require.True(t, attempt.ResponseTruncated)
	})

	t.Run("BinarySanitised", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("a\x00b\xff\xfec"))
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.Equal(t, "a\uFFFDb\uFFFDc", attempt.ResponseBody)
	})

	t.Run("HugeBodyClosesInsteadOfDraining", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		chunk := bytes.Repeat([]byte("z"), 32<<10)
		recv := startReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			for range 64 { // 2 MiB, far beyond the drain bound
				if _, err := w.Write(chunk); err != nil || r.Context().Err() != nil {
					return
				}
			}
		})
		attempt := Send(context.Background(), bundle.client, bundle.request(recv.URL))
		require.True(t, attempt.Delivered)
		require.True(t, attempt.ResponseTruncated)
		require.Len(t, attempt.ResponseBody, MaxResponseBody)
	})
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"abc", 0},
		{"-5", 0},
		{"1.5", 0},
		{"0", time.Second},
		{"1", time.Second},
		{" 90 ", 90 * time.Second},
		{"99999999999999999999999", 365 * 24 * time.Hour},
		{now.Add(10 * time.Minute).Format(http.TimeFormat), 10 * time.Minute},
		{"Fri, 02 Jan 2026 03:09:05 GMT", 5 * time.Minute},
		{now.Add(-time.Hour).Format(http.TimeFormat), time.Second},
		{"Friday, 02-Jan-26 03:05:05 GMT", time.Minute}, // RFC 850
		{"Fri Jan  2 03:06:05 2026", 2 * time.Minute},   // asctime
	} {
		require.Equal(t, tt.want, ParseRetryAfter(tt.in, now), tt.in)
	}
}

// BenchmarkSend measures signed 1 KiB pushes over kept-alive loopback
// connections from concurrent goroutines, as the webhooks queue's workers
// would send them (about 19k/s on two cores is what such a loop reaches).
func BenchmarkSend(b *testing.B) {
	guard, err := netguard.ParseGuard("127.0.0.1/32,::1/128")
	require.NoError(b, err)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	b.Cleanup(srv.Close)

	client := NewClient(guard, ClientOptions{})
	body, err := Payload("bench", time.Now(), map[string]string{"pad": strings.Repeat("x", 980)})
	require.NoError(b, err)
	req := Request{URL: srv.URL, MsgID: "msg_bench", Body: body, Secret: GenerateSecret()}

	var failed atomic.Int64
	b.SetParallelism(16) // I/O bound: more goroutines than cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !Send(context.Background(), client, req).Delivered {
				failed.Add(1)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pushes/s")
	b.ReportMetric(float64(conns.Load()), "conns")
	require.Zero(b, failed.Load())
}

// TestSendDuringRotation: a push signed under a new secret and the one it
// replaces verifies, with the official Standard Webhooks library, under
// either secret alone, and under neither a third.
func TestSendDuringRotation(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	recv := startReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	previous := GenerateSecret()
	req := bundle.request(recv.URL)
	req.PreviousSecret = previous
	require.True(t, Send(context.Background(), bundle.client, req).Delivered)

	got := recv.received()
	require.Len(t, got, 1)
	sigs := strings.Fields(got[0].header.Get("webhook-signature"))
	require.Len(t, sigs, 2, "one signature per secret")
	verify(t, bundle.secret, got[0])
	verify(t, previous, got[0])
	other, err := standardwebhooks.NewWebhook(GenerateSecret())
	require.NoError(t, err)
	require.Error(t, other.Verify(got[0].body, got[0].header), "a third secret verifies nothing")

	want, err := Sign(bundle.secret, req.MsgID, req.Timestamp, req.Body)
	require.NoError(t, err)
	require.Equal(t, want, sigs[0], "the new secret's signature comes first")
}
