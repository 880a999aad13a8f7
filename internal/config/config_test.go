package config

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/esp"
)

func env(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(env(nil))
	require.NoError(t, err)
	require.Equal(t, ":8080", cfg.ListenAddr)
	require.Equal(t, ":2525", cfg.SMTPAddr)
	require.Equal(t, 90, cfg.EventRetentionDays)
	require.Equal(t, time.Second, cfg.EventsPageCacheTTL)
	require.Equal(t, 32<<20, cfg.EventsPageCacheBytes)
	require.Equal(t, 100, cfg.RateLimitPerMinute)
	require.Equal(t, 30*time.Second, cfg.RequestTimeout)
	require.Equal(t, 5*time.Second, cfg.DBStatementTimeout)
	require.Equal(t, "json", cfg.LogFormat)
	require.Empty(t, cfg.SecretKey)
	require.ErrorContains(t, cfg.Require("DATABASE_URL", "MAILWATCH_SECRET_KEY"), "DATABASE_URL is required")
}

func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := Parse(env(map[string]string{
		"MAILWATCH_SECRET_KEY":  base64.StdEncoding.EncodeToString([]byte("too short")),
		"EVENT_RETENTION_DAYS":  "0",
		"LOG_LEVEL":             "loud",
		"LOG_FORMAT":            "xml",
		"REQUEST_TIMEOUT":       "soon",
		"EVENTS_PAGE_CACHE_TTL": "2m",
	}))
	require.Error(t, err)
	for _, want := range []string{"MAILWATCH_SECRET_KEY: must decode to 32 bytes", "EVENT_RETENTION_DAYS", "LOG_LEVEL", "LOG_FORMAT", "REQUEST_TIMEOUT", "EVENTS_PAGE_CACHE_TTL"} {
		require.ErrorContains(t, err, want)
	}
}

func TestStatementTimeoutBelowRequestTimeout(t *testing.T) {
	t.Parallel()
	_, err := Parse(env(map[string]string{"DB_STATEMENT_TIMEOUT": "30s"}))
	require.ErrorContains(t, err, "DB_STATEMENT_TIMEOUT must be more than a second below REQUEST_TIMEOUT")
	cfg, err := Parse(env(map[string]string{"DB_STATEMENT_TIMEOUT": "20s", "REQUEST_TIMEOUT": "1m"}))
	require.NoError(t, err)
	require.Equal(t, 20*time.Second, cfg.DBStatementTimeout)
}

func TestSecretKeyAndRedaction(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString(make([]byte, 32))
	vars := map[string]string{"MAILWATCH_SECRET_KEY": key, "DATABASE_URL": "postgres://u:hunter2@db/x", "LISTEN_ADDR": ":9999"}
	cfg, err := Parse(env(vars))
	require.NoError(t, err)
	require.Len(t, cfg.SecretKey, 32)
	require.NoError(t, cfg.Require("DATABASE_URL", "MAILWATCH_SECRET_KEY"))

	red := Redacted(env(vars))
	require.Equal(t, "[redacted]", red["DATABASE_URL"])
	require.Equal(t, "[redacted]", red["MAILWATCH_SECRET_KEY"])
	require.Equal(t, ":9999", red["LISTEN_ADDR"])
	for _, v := range red {
		require.NotContains(t, v, "hunter2")
	}
}

func TestMarkdownTableListsEveryVariable(t *testing.T) {
	t.Parallel()
	table := MarkdownTable()
	for _, v := range Vars {
		require.Contains(t, table, "| `"+v.Name+"` |")
		require.NotEmpty(t, v.Meaning, v.Name)
	}
	require.Equal(t, len(Vars)+2, strings.Count(table, "\n"))
}

// TestDocsConfigurationIsTheGeneratedTable holds docs/configuration.md's
// table to `mailwatch config table`'s output, whole: a stray blank line
// splits a Markdown table in two, an edited row drifts from the code, and
// a row added by hand is not a setting.
func TestDocsConfigurationIsTheGeneratedTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	for _, v := range Vars {
		require.Contains(t, string(doc), "| `"+v.Name+"` |", "docs/configuration.md's table lacks %s: paste `mailwatch config table`", v.Name)
	}
	require.Equal(t, MarkdownTable(), markdownTableAt(string(doc), "| Variable |"),
		"docs/configuration.md's table is not `mailwatch config table`'s output: paste it")
}

// markdownTableAt returns the Markdown table of doc whose header line
// starts with header: that line and every following line starting with
// "|", each with its newline.
func markdownTableAt(doc, header string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.SplitAfter(doc, "\n") {
		if !in && !strings.HasPrefix(line, header) {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		in = true
		b.WriteString(line)
	}
	return b.String()
}

// A captured provider webhook must not be replayable once its replay key is
// pruned: the default window is on, and no window can outlast half the
// retention (the window is open on both sides of the clock).
func TestProviderWebhookMaxAgeWithinReplayRetention(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(env(nil))
	require.NoError(t, err)
	require.Equal(t, 72*time.Hour, cfg.ProviderWebhookMaxAge)
	require.LessOrEqual(t, 2*cfg.ProviderWebhookMaxAge, esp.ReplayRetention)

	for _, ok := range []string{"0", "10m", "84h"} {
		cfg, err := Parse(env(map[string]string{"PROVIDER_WEBHOOK_MAX_AGE": ok}))
		require.NoError(t, err, ok)
		require.LessOrEqual(t, 2*cfg.ProviderWebhookMaxAge, esp.ReplayRetention, ok)
	}
	for _, bad := range []string{"85h", "168h", "720h", "-1s", "soon"} {
		_, err := Parse(env(map[string]string{"PROVIDER_WEBHOOK_MAX_AGE": bad}))
		require.ErrorContains(t, err, "PROVIDER_WEBHOOK_MAX_AGE must be a duration from 0 to 84h", bad)
	}
}

func TestNotificationMailSettings(t *testing.T) {
	cfg, err := Parse(env(map[string]string{"INBOUND_DOMAIN": "in.example.com"}))
	require.NoError(t, err)
	require.Equal(t, "mailwatch <notifications@in.example.com>", cfg.NotifyFrom)
	require.Empty(t, cfg.SMTPRelayURL)

	cfg, err = Parse(env(map[string]string{"SMTP_RELAY_URL": "smtps://u:p@relay.example.com", "NOTIFY_FROM": "alerts@example.com"}))
	require.NoError(t, err)
	require.Equal(t, "smtps://u:p@relay.example.com", cfg.SMTPRelayURL)
	require.Equal(t, "alerts@example.com", cfg.NotifyFrom)
	require.NotContains(t, fmt.Sprint(Redacted(env(map[string]string{"SMTP_RELAY_URL": "smtps://u:p@relay.example.com"}))), "u:p@")

	_, err = Parse(env(map[string]string{"SMTP_RELAY_URL": "http://relay.example.com", "NOTIFY_FROM": "not an address"}))
	require.ErrorContains(t, err, "SMTP_RELAY_URL")
	require.ErrorContains(t, err, "NOTIFY_FROM")
}

// TestDefaultPlan: without billing an instance's accounts are unlimited;
// with billing they start free; DEFAULT_PLAN chooses either way.
func TestDefaultPlan(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "unlimited"},
		{map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_x"}, "free"},
		{map[string]string{"STRIPE_PRICE_PLANS": "price_a=pro"}, "free"}, // a worker holds the price map, not the secret
		{map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_x", "DEFAULT_PLAN": "unlimited"}, "unlimited"},
		{map[string]string{"DEFAULT_PLAN": "pro"}, "pro"},
	} {
		cfg, err := Parse(env(c.env))
		require.NoError(t, err, c.env)
		require.Equal(t, c.want, cfg.DefaultPlan, c.env)
	}
	_, err := Parse(env(map[string]string{"DEFAULT_PLAN": "gold"}))
	require.ErrorContains(t, err, `DEFAULT_PLAN: "gold" is not a plan`)
}

// PROVIDER_ACCOUNT_CONCURRENCY unset leaves the bound to the worker
// (half of its default queue's workers); set, it is read and checked.
func TestProviderAccountConcurrency(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(env(nil))
	require.NoError(t, err)
	require.Zero(t, cfg.ProviderAccountConcurrency)
	cfg, err = Parse(env(map[string]string{"PROVIDER_ACCOUNT_CONCURRENCY": "7"}))
	require.NoError(t, err)
	require.Equal(t, 7, cfg.ProviderAccountConcurrency)
	_, err = Parse(env(map[string]string{"PROVIDER_ACCOUNT_CONCURRENCY": "0"}))
	require.ErrorContains(t, err, "PROVIDER_ACCOUNT_CONCURRENCY")
}

func TestSpamFilterSettings(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(env(map[string]string{"SPAMD_ADDR": "unix:/run/spamd.sock"}))
	require.NoError(t, err)
	require.Equal(t, "unix:/run/spamd.sock", cfg.SpamdAddr)
	cfg, err = Parse(env(map[string]string{"RSPAMD_URL": "http://127.0.0.1:11333", "RSPAMD_PASSWORD": "pw"}))
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:11333", cfg.RspamdURL)
	require.Equal(t, "pw", cfg.RspamdPassword)
	_, err = Parse(env(map[string]string{"SPAMD_ADDR": "127.0.0.1:783", "RSPAMD_URL": "http://127.0.0.1:11333"}))
	require.ErrorContains(t, err, "set one of SPAMD_ADDR and RSPAMD_URL")
	for _, bad := range []string{"127.0.0.1:11333", "ftp://x", "http://"} {
		_, err = Parse(env(map[string]string{"RSPAMD_URL": bad}))
		require.ErrorContains(t, err, "RSPAMD_URL must be an http or https URL", bad)
	}
}
