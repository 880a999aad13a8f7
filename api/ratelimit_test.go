package api_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/mailwatch/mailwatch/api"
)

func TestRateLimit(t *testing.T) {
	t.Parallel()

	t.Run("101stRequestIs429", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(o *setupOpts) { o.limit = 100 })
		a := b.createAccount(t)
		for i := 1; i <= 100; i++ {
			resp := b.do(t, "GET", "/api/accounts/me/dashboard-summary", a.Key, nil)
			require.Equal(t, http.StatusOK, resp.Status, "request %d", i)
			require.Equal(t, "100", resp.Header.Get("X-RateLimit-Limit"))
			require.Equal(t, strconv.Itoa(100-i), resp.Header.Get("X-RateLimit-Remaining"))
			reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
			require.NoError(t, err)
			require.InDelta(t, time.Now().Add(time.Minute).Unix(), reset, 61)
		}
		resp := b.do(t, "GET", "/api/accounts/me/dashboard-summary", a.Key, nil)
		require.Equal(t, http.StatusTooManyRequests, resp.Status)
		require.Contains(t, resp.Detail(t), "rate limit")
		retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		require.NoError(t, err)
		require.True(t, retry >= 1 && retry <= 60, "Retry-After %d", retry)
		require.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))

		// Errors count and carry the headers too; another key has its own budget.
		other := b.createAccount(t)
		resp = b.do(t, "DELETE", "/api/accounts/me/api-keys/not-a-uuid", other.Key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status)
		require.Equal(t, "99", resp.Header.Get("X-RateLimit-Remaining"))
	})

	t.Run("AccountCreationIsLimitedPerIP", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(o *setupOpts) { o.limit = 3 })
		for i := 0; i < 3; i++ {
			resp := b.do(t, "POST", "/api/accounts", "", map[string]string{"email": "x", "password": "y"})
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
			require.Equal(t, strconv.Itoa(2-i), resp.Header.Get("X-RateLimit-Remaining"))
		}
		resp := b.do(t, "POST", "/api/accounts", "", map[string]string{"email": "x", "password": "y"})
		require.Equal(t, http.StatusTooManyRequests, resp.Status)
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	})

	t.Run("WebhookIngressHasItsOwnHigherBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(o *setupOpts) {
			o.limit = 2
			o.deps = func(d *api.Deps) {
				d.IngressLimiter = limiter.New(memory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 5})
			}
		})
		for i := 0; i < 2; i++ {
			b.do(t, "POST", "/api/accounts", "", map[string]string{})
		}
		require.Equal(t, http.StatusTooManyRequests, b.do(t, "POST", "/api/accounts", "", map[string]string{}).Status)

		// The same IP still reaches the ingress webhook (unsigned: 401), on a
		// budget of its own.
		for i := 0; i < 5; i++ {
			resp := b.do(t, "POST", "/api/webhooks/email?to=nobody@inbound.mailwatch.test", "", "From: a@b.c\r\n\r\nhi")
			require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
			require.Equal(t, "5", resp.Header.Get("X-RateLimit-Limit"))
			require.Equal(t, strconv.Itoa(4-i), resp.Header.Get("X-RateLimit-Remaining"))
		}
		require.Equal(t, http.StatusTooManyRequests,
			b.do(t, "POST", "/api/webhooks/email?to=nobody@inbound.mailwatch.test", "", "From: a@b.c\r\n\r\nhi").Status)
	})

	t.Run("RedisSharesTheBudgetAcrossProcesses", func(t *testing.T) {
		t.Parallel()
		url := os.Getenv("TEST_REDIS_URL")
		if url == "" {
			t.Skip("TEST_REDIS_URL unset (scripts/test sets it)")
		}
		opts, err := redis.ParseURL(url)
		require.NoError(t, err)
		client := redis.NewClient(opts)
		t.Cleanup(func() { client.Close() })
		require.NoError(t, client.Ping(context.Background()).Err())

		prefix := "mailwatch-test:" + strconv.FormatInt(time.Now().UnixNano(), 10)
		tx := setup(t).db
		first := setup(t, func(o *setupOpts) { o.db = tx; o.lim = limiterFor(t, client, prefix) })
		second := setup(t, func(o *setupOpts) { o.db = tx; o.lim = limiterFor(t, client, prefix) })

		a := first.createAccount(t) // charged to the IP budget, not the key's
		for i := 0; i < 10; i++ {
			b := first
			if i%2 == 1 {
				b = second
			}
			require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", a.Key, nil).Status, "request %d", i)
		}
		require.Equal(t, http.StatusTooManyRequests, first.do(t, "GET", "/api/accounts/me", a.Key, nil).Status)
		require.Equal(t, http.StatusTooManyRequests, second.do(t, "GET", "/api/accounts/me", a.Key, nil).Status)
	})
}

func limiterFor(t *testing.T, client *redis.Client, prefix string) *limiter.Limiter {
	store, err := sredis.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: prefix, MaxRetry: 3})
	require.NoError(t, err)
	return limiter.New(store, limiter.Rate{Period: time.Minute, Limit: 10})
}
