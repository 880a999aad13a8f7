package api_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/mailwatch/mailwatch/api"
)

// TestMetricsLabelsSurviveBufferReuse drives mixed methods over kept-alive
// connections, where fasthttp reuses each connection's header buffer, and
// scrapes /metrics between them: every scrape must succeed and name only
// real methods.
func TestMetricsLabelsSurviveBufferReuse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := api.New(api.Deps{StoreDeps: api.StoreDeps{DB: b.db}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HTTPDeps: api.HTTPDeps{Limiter: limiter.New(memory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 1 << 30})}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	base := "http://" + ln.Addr().String()

	// One client per goroutine, one kept-alive connection each.
	methods := []string{"DELETE", "GET", "PATCH", "POST", "PUT", "OPTIONS", "HEAD"}
	paths := []string{"/api/accounts/me", "/healthz", "/api/accounts/me/api-keys", "/api/nope"}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for i := range 60 {
				m := methods[(i+g)%len(methods)]
				req, err := http.NewRequest(m, base+paths[(i/len(methods)+g)%len(paths)], strings.NewReader("{}"))
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	scrape := func() string {
		resp, err := http.Get(base + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		return string(body)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		scrape()
	}
	body := scrape()
	label := regexp.MustCompile(`mailwatch_http_requests_total\{method="([^"]*)",route="([^"]*)"`)
	seen := map[string]bool{}
	for _, m := range label.FindAllStringSubmatch(body, -1) {
		seen[m[1]] = true
		require.Contains(t, append(methods, "other"), m[1], "a method label must be a real method")
		require.True(t, m[2] == "unmatched" || strings.HasPrefix(m[2], "/"), "route label %q", m[2])
	}
	require.True(t, seen["DELETE"] && seen["GET"] && seen["POST"], "labels seen: %v", seen)
}
