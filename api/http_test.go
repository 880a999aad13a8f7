package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbtest"
)

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)

	t.Run("UnknownRouteIsJSON404", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/nope", a.Key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status)
		require.Contains(t, resp.Detail(t), "/api/nope")
	})
	t.Run("WrongMethodIsJSON405", func(t *testing.T) {
		resp := b.do(t, "PUT", "/api/accounts/me", a.Key, nil)
		require.Equal(t, http.StatusMethodNotAllowed, resp.Status)
		require.Contains(t, resp.Detail(t), "PUT")
	})
	t.Run("BodyTooLargeIs413", func(t *testing.T) {
		srv := api.New(api.Deps{StoreDeps: api.StoreDeps{DB: b.db}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			HTTPDeps: api.HTTPDeps{BodyLimit: 1024, Limiter: limiter.New(memory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 100})}})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go srv.Serve(ln)
		t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
		body := `{"email": "` + strings.Repeat("a", 2000) + `@example.com", "password": "long enough"}`
		resp, err := http.Post("http://"+ln.Addr().String()+"/api/accounts", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		got, _ := io.ReadAll(resp.Body)
		require.Contains(t, string(got), `"detail":"request body too large"`)
	})
	t.Run("NonJSONContentTypeIs415", func(t *testing.T) {
		req := httptest.NewRequest("POST", "/api/accounts", strings.NewReader("email=x"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	})
	t.Run("PanicIsGeneric500", func(t *testing.T) {
		type req struct{}
		api.Handle(b.srv.Router(), api.Endpoint[req, api.StatusResponse]{
			Method: "GET", Path: "/test/panic", Auth: api.AuthOps, Summary: "panics",
			Call: func(ctx context.Context, _ *req) (*api.StatusResponse, error) { panic("secret internal detail") },
		})
		resp, err := b.srv.App().Test(httptest.NewRequest("GET", "/test/panic", nil), -1)
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		got, _ := io.ReadAll(resp.Body)
		require.JSONEq(t, `{"detail":"internal server error"}`, string(got))
		require.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	})
	t.Run("DeadlineExceededIs503", func(t *testing.T) {
		type req struct{}
		srv := api.New(api.Deps{StoreDeps: api.StoreDeps{DB: b.db}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			HTTPDeps: api.HTTPDeps{RequestTimeout: 20 * time.Millisecond,
				Limiter: limiter.New(memory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 100})}})
		api.Handle(srv.Router(), api.Endpoint[req, api.StatusResponse]{
			Method: "GET", Path: "/test/slow", Auth: api.AuthNone, Summary: "slow",
			Call: func(ctx context.Context, _ *req) (*api.StatusResponse, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			},
		})
		resp, err := srv.App().Test(httptest.NewRequest("GET", "/test/slow", nil), -1)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	})
}

// TestRequestID: every request gets an id of the server's own, unique even
// when a client sends the same X-Request-Id twice; a well-formed client id is
// logged beside it, an ill-formed one is not.
func TestRequestID(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	b := setup(t, func(o *setupOpts) {
		o.deps = func(d *api.Deps) { d.Logger = slog.New(slog.NewJSONHandler(logs, nil)) }
	})
	seen := map[string]bool{}
	for _, client := range []string{"abc-123", "abc-123", "bad id with spaces", strings.Repeat("x", 129)} {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.Header.Set("X-Request-Id", client)
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		id := resp.Header.Get("X-Request-Id")
		require.Len(t, id, 36, "a UUID of ours")
		require.NotEqual(t, client, id)
		require.False(t, seen[id], "ids are unique per request")
		seen[id] = true
		var line struct {
			RequestID       string `json:"request_id"`
			ClientRequestID string `json:"client_request_id"`
		}
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if strings.Contains(l, id) {
				require.NoError(t, json.Unmarshal([]byte(l), &line))
			}
		}
		require.Equal(t, id, line.RequestID, "the access log names the request by our id")
		if client == "abc-123" {
			require.Equal(t, client, line.ClientRequestID, "the client's id is kept beside ours")
		} else {
			require.Empty(t, line.ClientRequestID, "an ill-formed client id is not logged")
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	b.do(t, "GET", "/api/accounts/me", a.Key, nil)
	b.do(t, "GET", "/api/accounts/me", "", nil)
	resp := b.do(t, "GET", "/metrics", "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	body := string(resp.Body)
	require.Contains(t, body, `mailwatch_http_requests_total{method="GET",route="/api/accounts/me",status="200"} 1`)
	require.Contains(t, body, `mailwatch_http_requests_total{method="GET",route="/api/accounts/me",status="401"} 1`)
	require.Contains(t, body, `mailwatch_http_request_duration_seconds_bucket{method="GET",route="/api/accounts/me",le="+Inf"} 2`)
	require.Contains(t, body, "go_goroutines")
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/readyz", "", nil).Status)
	pool.Close()
	resp := b.do(t, "GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.Status)
	require.Equal(t, "database unreachable", resp.Detail(t))
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/healthz", "", nil).Status)
}

func TestGracefulShutdownFinishesInFlightRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type req struct{}
	started := make(chan struct{})
	api.Handle(b.srv.Router(), api.Endpoint[req, api.StatusResponse]{
		Method: "GET", Path: "/test/slow", Auth: api.AuthOps, Summary: "slow",
		Call: func(ctx context.Context, _ *req) (*api.StatusResponse, error) {
			close(started)
			time.Sleep(300 * time.Millisecond)
			return &api.StatusResponse{Status: "finished"}, nil
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- b.srv.Serve(ln) }()

	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/test/slow")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		done <- result{status: resp.StatusCode, body: string(body)}
	}()
	<-started
	require.NoError(t, b.srv.Shutdown(context.Background()))
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, "finished")
	require.NoError(t, <-served)

	_, err = http.Get("http://" + ln.Addr().String() + "/healthz")
	require.Error(t, err, "no new connections after shutdown")
}

func TestTextPostgresCannotStoreIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)

	resp := b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, `{"label": "a\u0000b"}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "label: must not contain NUL")

	resp = b.do(t, "GET", "/api/accounts/me/events?event_type=%FF%FE", a.Key, nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "event_type: must be valid UTF-8")

	resp = b.do(t, "GET", "/api/accounts/me/events?limit=0", a.Key, nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	require.Equal(t, "limit: must be at least 1", resp.Detail(t), "no Go struct names in field paths")
}

func TestContentTypeMustBeJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	for _, ct := range []string{"application/jsonx", "application/json-patch+json", "text/plain", "application/x-www-form-urlencoded"} {
		req := httptest.NewRequest("POST", "/api/accounts/me/api-keys", strings.NewReader(`{"label": "x"}`))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+a.Key)
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, ct)
	}
	for i, ct := range []string{"application/json; charset=utf-8", "Application/JSON", ""} {
		req := httptest.NewRequest("POST", "/api/accounts/me/api-keys", strings.NewReader(`{"label": "ok`+string(rune('a'+i))+`"}`))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Authorization", "Bearer "+a.Key)
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.StatusCode, ct)
	}

	// A multipart body is not parsed ahead of authentication.
	req := httptest.NewRequest("GET", "/api/accounts/me", strings.NewReader("junk"))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	resp, err := b.srv.App().Test(req, -1)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("X-RateLimit-Limit"))
}
