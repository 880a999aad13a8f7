package api_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/stretchr/testify/require"
)

// encodeBody applies the content codings of a Content-Encoding value, in
// the order they are listed (RFC 9110 section 8.4).
func encodeBody(t testing.TB, coding string, body []byte) []byte {
	t.Helper()
	for _, c := range strings.Split(coding, ",") {
		var (
			buf bytes.Buffer
			w   io.WriteCloser
		)
		switch strings.ToLower(strings.TrimSpace(c)) {
		case "identity":
			continue
		case "gzip":
			w = gzip.NewWriter(&buf)
		case "deflate":
			w = zlib.NewWriter(&buf)
		case "br":
			w = brotli.NewWriter(&buf)
		default:
			t.Fatalf("no encoder for %q", c)
		}
		_, err := w.Write(body)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		body = buf.Bytes()
	}
	return body
}

// zeroBomb is size zero bytes, gzipped once per layer, written as a stream:
// the bomb never exists decoded in the test's memory.
func zeroBomb(t testing.TB, size int64, layers int) []byte {
	t.Helper()
	var out bytes.Buffer
	writers := make([]*gzip.Writer, layers)
	var w io.Writer = &out
	for i := range writers {
		zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
		require.NoError(t, err)
		writers[i], w = zw, zw
	}
	chunk := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(chunk)) {
		_, err := w.Write(chunk[:min(int64(len(chunk)), left)])
		require.NoError(t, err)
	}
	for i := len(writers) - 1; i >= 0; i-- {
		require.NoError(t, writers[i].Close())
	}
	return out.Bytes()
}

// TestRequestContentCodingsAreRefused: a request body with a content coding
// (gzip, chained gzip, deflate, br) is refused with 415 before any handler
// reads it, on the unauthenticated routes, a key-authenticated route, an
// ingress webhook and the dashboard's forms alike; the route's work is not
// done (no account, no token), so no handler saw decoded bytes.
func TestRequestContentCodingsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	ctx := context.Background()

	send := func(t *testing.T, path, coding, contentType string, body []byte, header http.Header) response {
		t.Helper()
		req := httptest.NewRequest("POST", "http://mailwatch.test"+path, bytes.NewReader(encodeBody(t, coding, body)))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Content-Encoding", coding)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return response{Status: resp.StatusCode, Header: resp.Header, Body: got}
	}
	refused := func(t *testing.T, r response) {
		t.Helper()
		require.Equal(t, http.StatusUnsupportedMediaType, r.Status, "%s", r.Body)
		require.Equal(t, "identity", r.Header.Get("Accept-Encoding"), "RFC 9110: a 415 for a content coding names the accepted ones")
		require.Contains(t, r.Detail(t), "Content-Encoding")
		require.Contains(t, r.Detail(t), "uncompressed")
	}
	countAccounts := func(t *testing.T, email string) int {
		var n int
		require.NoError(t, b.db.QueryRow(ctx, "SELECT count(*) FROM accounts WHERE email = $1", email).Scan(&n))
		return n
	}

	for _, coding := range []string{"gzip", "gzip, gzip", "deflate", "br", "GZIP", "identity, gzip"} {
		t.Run(strings.NewReplacer(", ", "-", " ", "").Replace(coding), func(t *testing.T) {
			email := uniqueEmail(t)
			signup, _ := json.Marshal(map[string]string{"email": email, "password": "correct horse battery"})
			refused(t, send(t, "/api/accounts", coding, "application/json", signup, nil))
			require.Zero(t, countAccounts(t, email), "the sign-up handler never saw the decoded body")

			grant, _ := json.Marshal(map[string]string{"email": a.Email, "password": "correct horse battery"})
			r := send(t, "/api/auth/token", coding, "application/json", grant, nil)
			refused(t, r)
			require.NotContains(t, string(r.Body), "access_token")

			refused(t, send(t, "/api/notification-addresses/verify", coding, "application/json", []byte(`{"token":"x"}`), nil))
			refused(t, send(t, "/api/webhooks/email?to=nobody", coding, "message/rfc822", []byte("Subject: hi\r\n\r\nhello\r\n"), nil))
			refused(t, send(t, "/api/webhooks/sms", coding, "application/x-www-form-urlencoded", []byte("From=%2B1555&Body=hi"), nil))
			refused(t, send(t, "/api/webhooks/payments/stripe", coding, "application/json", []byte(`{}`), nil))
			refused(t, send(t, "/api/accounts/me/domains", coding, "application/json", []byte(`{"domain":"gzip.example.com"}`),
				http.Header{"Authorization": {"Bearer " + a.Key}}))
			var domains int
			require.NoError(t, b.db.QueryRow(ctx, "SELECT count(*) FROM domains WHERE name = 'gzip.example.com'").Scan(&domains))
			require.Zero(t, domains)

			// The dashboard's forms: sign-up (no session) and a signed-in
			// action, with a valid CSRF token in the encoded form.
			w := newWebClient(t, b)
			tok := w.csrf("/signup")
			form := url.Values{"csrf": {tok}, "email": {email}, "password": {"correct horse battery"}}.Encode()
			refused(t, send(t, "/signup", coding, "application/x-www-form-urlencoded", []byte(form),
				http.Header{"Origin": {"http://mailwatch.test"}, "Cookie": {cookieHeader(w)}}))
			require.Zero(t, countAccounts(t, email))
		})
	}

	t.Run("IdentityAndNoBodyPass", func(t *testing.T) {
		req := httptest.NewRequest("POST", "/api/accounts", strings.NewReader(`{"email":"`+uniqueEmail(t)+`","password":"correct horse battery"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "identity")
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		// A request without a body has nothing to decode.
		req = httptest.NewRequest("GET", "/api/accounts/me", nil)
		req.Header.Set("Authorization", "Bearer "+a.Key)
		req.Header.Set("Content-Encoding", "gzip")
		resp, err = b.srv.App().Test(req, -1)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})

	t.Run("DataAPIAnswersInPostgRESTShape", func(t *testing.T) {
		req := httptest.NewRequest("GET", "/rest/v1/events", bytes.NewReader(encodeBody(t, "gzip", []byte("{}"))))
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Contains(t, body, "code")
		require.Contains(t, body["message"], "Content-Encoding")
		require.NotContains(t, body, "detail")
	})
}

func cookieHeader(w *webClient) string {
	var parts []string
	for _, c := range w.cookies {
		parts = append(parts, c.Name+"="+c.Value)
	}
	return strings.Join(parts, "; ")
}

// TestDecompressionBombsAreNotDecoded sends the bombs of the hostile probe
// (a double-gzip body to sign-up, single-gzip bodies to the token route and
// an ingress webhook) through the whole stack and reads this process's own
// allocation figures: each request allocates a small fraction of what the
// bomb decodes to. Not parallel, so other tests' allocations stay out of the
// figure.
func TestDecompressionBombsAreNotDecoded(t *testing.T) {
	b := setup(t)
	const decoded = 256 << 20
	single, double := zeroBomb(t, decoded, 1), zeroBomb(t, decoded, 2)
	require.Less(t, len(single), 1<<20, "inside BODY_LIMIT_BYTES")
	for _, tc := range []struct {
		path, coding string
		body         []byte
	}{
		{"/api/accounts", "gzip, gzip", double},
		{"/api/accounts", "gzip", single},
		{"/api/auth/token", "gzip", single},
		{"/api/webhooks/email", "gzip", single},
		{"/api/notification-addresses/verify", "gzip, gzip", double},
	} {
		req := httptest.NewRequest("POST", tc.path, bytes.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", tc.coding)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		require.Less(t, allocated, uint64(decoded/8), "%s (%s): %d MiB allocated for a %d MiB bomb", tc.path, tc.coding, allocated>>20, decoded>>20)
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s %s", tc.path, tc.coding)
	}
}

// TestHeaderFieldsTooLargeShape: a request whose header fields pass what
// the server reads (431, answered before its path is parsed) gets
// PostgREST's error shape on the data API and the REST shape elsewhere,
// on a new connection and on one kept alive from an earlier request.
func TestHeaderFieldsTooLargeShape(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Shutdown(context.Background()) })
	base := "http://" + ln.Addr().String()
	padding := strings.Repeat("x", 8<<10)

	for _, tc := range []struct {
		path  string
		pgrst bool
	}{
		{"/rest/v1/events?select=id", true},
		{"/rest/v1/" + padding, true}, // the request line itself too long
		{"/rest/v1", true},
		{"/api/accounts/me", false},
		{"/rest/v10", false},
	} {
		for _, keepAlive := range []bool{false, true} {
			client := &http.Client{Transport: &http.Transport{}}
			if keepAlive {
				// An earlier request on the same connection.
				resp, err := client.Get(base + "/healthz")
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			req, err := http.NewRequest("GET", base+tc.path, nil)
			require.NoError(t, err)
			if !strings.Contains(tc.path, padding) {
				req.Header.Set("X-Padding", padding)
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			var body map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			resp.Body.Close()
			name := tc.path[:min(len(tc.path), 30)]
			require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode, name)
			if tc.pgrst {
				require.Equal(t, "PGRST000", body["code"], "%s: %v", name, body)
				require.Contains(t, body, "message")
				require.Contains(t, body, "details")
				require.Contains(t, body, "hint")
				require.NotContains(t, body, "detail")
			} else {
				require.Contains(t, body, "detail", "%s: %v", name, body)
				require.NotContains(t, body, "code")
			}
			client.CloseIdleConnections()
		}
	}
}

// TestOpenAPIDocumentsContentCodingRefusal: the document says bodies are
// never decompressed, and every operation that takes a body lists 415.
func TestOpenAPIDocumentsContentCodingRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.do(t, "GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
		Paths map[string]map[string]struct {
			RequestBody any            `json:"requestBody"`
			Responses   map[string]any `json:"responses"`
		} `json:"paths"`
	}
	resp.JSON(t, &doc)
	require.Contains(t, doc.Info.Description, "Content-Encoding other than identity is 415")
	bodies := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if op.RequestBody == nil {
				continue
			}
			bodies++
			require.Contains(t, op.Responses, "415", "%s %s takes a body", method, path)
		}
	}
	require.Greater(t, bodies, 20)
}
