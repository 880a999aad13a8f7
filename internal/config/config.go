// Package config reads mailwatch's configuration from the environment.
//
// Every variable is declared once in Vars, with its default and meaning, so
// that the table of docs/configuration.md, the start-up log line and the parser cannot drift
// apart. Secret values are redacted whenever the configuration is printed.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// fmtHours writes a whole number of hours as "84h".
func fmtHours(d time.Duration) string { return strconv.Itoa(int(d/time.Hour)) + "h" }

// Var describes one environment variable.
type Var struct {
	Name    string
	Default string
	Secret  bool
	Meaning string
}

// Vars is the table of every environment variable mailwatch reads.
var Vars = []Var{
	{Name: "DATABASE_URL", Default: "", Secret: true, Meaning: "Postgres connection URL (required by every role). `scripts/run` and `scripts/test` start a local cluster when it is unset."},
	{Name: "DATABASE_READ_URL", Default: "", Secret: true, Meaning: "Optional streaming replica (hot standby) of DATABASE_URL for the API's read-only routes: the data API's reads, the aggregate endpoints (daily volumes, breakdowns, dashboard summary, DMARC sources and guidance) and the dashboard's charts. Used only while its measured lag is within DATABASE_READ_MAX_LAG; the primary serves them otherwise. Empty: everything reads the primary."},
	{Name: "DATABASE_READ_MAX_LAG", Default: "5s", Meaning: "Staleness past which the API stops reading DATABASE_READ_URL and reads the primary, until the replica catches up; the replica is probed every second, so a read it serves misses at most the writes of the last DATABASE_READ_MAX_LAG plus a second."},
	{Name: "LISTEN_ADDR", Default: ":8080", Meaning: "Address the REST API listens on (`api`, `dev`)."},
	{Name: "METRICS_ADDR", Default: ":9091", Meaning: "Address where `worker` and `smtp` processes serve /healthz, /readyz and /metrics (the API serves them on LISTEN_ADDR)."},
	{Name: "SMTP_ADDR", Default: ":2525", Meaning: "Address the inbound SMTP listener binds (`smtp`, `dev`)."},
	{Name: "INBOUND_DOMAIN", Default: "inbound.mailwatch.localhost", Meaning: "Domain of receiver and reporting addresses; the SMTP listener accepts mail only for it."},
	{Name: "INBOUND_MX_HOST", Default: "", Meaning: "Host name customers' MX records point to for custom inbound subdomains (MX setup); empty means INBOUND_DOMAIN."},
	{Name: "SMTP_MAX_MESSAGE_BYTES", Default: "10485760", Meaning: "Largest inbound message (SMTP: 552 beyond, advertised with SIZE; email ingress webhook: 413 beyond, also capped by BODY_LIMIT_BYTES). At most 26214400."},
	{Name: "SMTP_TLS_CERT", Default: "", Meaning: "PEM certificate file (chain) for STARTTLS on the SMTP listener; with SMTP_TLS_KEY. Unset: no STARTTLS."},
	{Name: "SMTP_TLS_KEY", Default: "", Secret: true, Meaning: "PEM private key file for SMTP_TLS_CERT (the value is a path; the file is the secret)."},
	{Name: "SMTP_MAX_CONNECTIONS", Default: "1000", Meaning: "Open inbound SMTP sessions per `smtp` process; a connection beyond is answered `421 4.7.0` and closed. Each idle session holds about 90 KiB."},
	{Name: "SMTP_MAX_CONNECTIONS_PER_IP", Default: "20", Meaning: "Open inbound SMTP sessions per client address (an IPv6 client's /64); a connection beyond is answered `421 4.7.0` and closed while other addresses are still served. At most SMTP_MAX_CONNECTIONS."},
	{Name: "SMTP_SESSION_TIMEOUT", Default: "10m", Meaning: "Longest inbound SMTP session, whatever the client sends (trickled bytes and keep-alive commands do not extend it). Separately, a session that makes no progress (an accepted MAIL or RCPT, message data) for 2 minutes is closed: NOOP, RSET and HELO do not count. From 1m to 1h."},
	{Name: "PUBLIC_BASE_URL", Default: "", Meaning: "scheme://host[:port] under which clients reach the API (e.g. https://api.example.com), used to rebuild the URL Twilio signed behind a proxy; empty means the request's own scheme and Host."},
	{Name: "MAILWATCH_SECRET_KEY", Default: "", Secret: true, Meaning: "32 bytes, standard base64. Encrypts signing secrets at rest (AES-256-GCM). `dev` and `scripts/run` generate one for local use when it is unset."},
	{Name: "MAILWATCH_SECRET_KEY_PREVIOUS", Default: "", Secret: true, Meaning: "Comma-separated older keys (base64), still accepted for decryption during a key rotation."},
	{Name: "REDIS_URL", Default: "", Secret: true, Meaning: "When set, rate-limit counters live in Redis and are shared by every API replica; otherwise each replica counts alone, in memory."},
	{Name: "DNS_RESOLVER", Default: "", Meaning: "DNS server (host:port) used for domain checks; empty means the first nameserver of /etc/resolv.conf."},
	{Name: "BLOCKLIST_ZONES", Default: "", Meaning: "Comma-separated DNS blocklists checked for the IPs that carry each domain's mail, each `zone` (an IP list) or `zone=domain` (a domain list); replaces the built-in catalog (docs/features/reputation.md). Empty means the catalog."},
	{Name: "BLOCKLIST_RESOLVER", Default: "", Meaning: "DNS server (host:port) the blocklist lookups go through; empty means DNS_RESOLVER. Most lists refuse queries from public resolvers (8.8.8.8, 1.1.1.1, ...): use your own recursive resolver, a warning is logged at start-up otherwise."},
	{Name: "DNS_CHECK_INTERVAL", Default: "15m", Meaning: "How often every domain's DNS is re-checked for changes (one check per domain per interval, spread over it); at least 1m."},
	{Name: "SMTP_PROBE", Default: "on", Meaning: "on or off: probe every MX host of every domain on port SMTP_PROBE_PORT (STARTTLS, certificate, DANE; never MAIL or RCPT) every 6 hours and on request. Many clouds block outbound port 25: turn it off there, or every probe is inconclusive. See docs/features/transport.md."},
	{Name: "SMTP_PROBE_PORT", Default: "25", Meaning: "TCP port the MX probes connect to (tests and port-forwarding setups change it); the DANE TLSA name follows it."},
	{Name: "SMTP_PROBE_CA_FILE", Default: "", Meaning: "PEM file of extra CA certificates trusted, beside the system roots, when verifying MX hosts' certificates. The probes' EHLO name is INBOUND_MX_HOST, else INBOUND_DOMAIN."},
	{Name: "SPAMD_ADDR", Default: "", Meaning: "SpamAssassin's spamd (host:port, or its Unix socket as a path or unix:path): when set, every message a receiver gets over SMTP is given a spam score with the rules that fired (docs/features/deliverability.md). Messages over 500 KiB are not scored."},
	{Name: "RSPAMD_URL", Default: "", Meaning: "Base URL of an rspamd normal worker (e.g. http://127.0.0.1:11333), the alternative to SPAMD_ADDR (set one of them): its /checkv2 scores each message with the session's IP, HELO and MAIL FROM."},
	{Name: "RSPAMD_PASSWORD", Default: "", Secret: true, Meaning: "Password sent to rspamd in its Password header, when its worker requires one."},
	{Name: "HEALTH_HISTORY_DAYS", Default: "90", Meaning: "Health-score history older than this is deleted by a periodic job."},
	{Name: "WEBHOOK_ALLOWED_CIDRS", Default: "", Meaning: "Comma-separated CIDRs that webhook destinations may resolve to even though they are private, loopback or otherwise reserved."},
	{Name: "CHANNEL_ALLOWED_HOSTS", Default: "", Meaning: "Comma-separated hosts (host[:port], or *.suffix[:port]) that notification channels may send to; when set it replaces every kind's built-in list (Slack hooks.slack.com; Teams *.logic.azure.com, *.powerplatform.com, *.webhook.office.com; PagerDuty events.pagerduty.com, events.eu.pagerduty.com) and admits http as well as https. Destinations still pass the SSRF guard (WEBHOOK_ALLOWED_CIDRS). See docs/features/notifications.md."},
	{Name: "INBOUND_WEBHOOK_SECRET", Default: "", Secret: true, Meaning: "Standard Webhooks secret (whsec_...) that signs requests to the email ingress webhook."},
	{Name: "PROVIDER_WEBHOOK_MAX_AGE", Default: "72h", Meaning: "How far a sending provider's signed webhook timestamp (SendGrid, Mailgun, Resend/Svix, SNS) may be from the server's clock, at most 84h (half the 7-day retention of replay keys, so a captured webhook cannot be replayed once its key is pruned). Providers retry with the original timestamp for hours (SendGrid 24 h, Svix about 1.5 days). 0 turns the window off, which lets a capture be replayed after 7 days: only for old test vectors."},
	{Name: "TWILIO_AUTH_TOKEN", Default: "", Secret: true, Meaning: "Twilio auth token used to verify X-Twilio-Signature on the SMS ingress webhook."},
	{Name: "EVENT_RETENTION_DAYS", Default: "90", Meaning: "Events (with their webhook deliveries) and sending providers' message events older than this (at least 7, longer than the webhook retry schedule) are deleted by periodic jobs, a week's partition at a time (kept up to a week longer; docs/partitions.md); unacknowledged alerts are kept. Each plan keeps them for its own retention under this maximum."},
	{Name: "EVENTS_PAGE_CACHE_TTL", Default: "1s", Meaning: "How long the API may serve a cached first page of an account's event listing, REST or /rest/v1 (every request still checks the account's newest event, so new events always show); 0 turns the caches off. At most 1m."},
	{Name: "EVENTS_PAGE_CACHE_BYTES", Default: "33554432", Meaning: "Memory for cached first pages of event listings, per API process, for each of the REST listing's and the data API's (/rest/v1/events) caches; 0 turns the caches off."},
	{Name: "RATE_LIMIT_PER_MINUTE", Default: "100", Meaning: "Requests per minute per API key (fixed window); unauthenticated routes are limited per client IP with the same budget."},
	{Name: "INGRESS_RATE_LIMIT_PER_MINUTE", Default: "1200", Meaning: "Requests per minute per client IP on the webhook ingress routes (/api/webhooks/...), which providers call in bursts."},
	{Name: "REQUEST_TIMEOUT", Default: "30s", Meaning: "Deadline for one API request (long-poll waits get their own timeout plus a margin)."},
	{Name: "BODY_LIMIT_BYTES", Default: "1048576", Meaning: "Largest accepted request body; larger requests get 413."},
	{Name: "SHUTDOWN_TIMEOUT", Default: "25s", Meaning: "How long a stopping process waits for in-flight requests and jobs to finish."},
	{Name: "DB_MAX_CONNS", Default: "20", Meaning: "Size of each process's Postgres connection pool."},
	{Name: "DB_STATEMENT_TIMEOUT", Default: "5s", Meaning: "Bound on each database statement of an API request or an SMTP session, the wait for a pooled connection included: the server's statement_timeout of the `api`/`data-api` pools, and a client-side deadline one second later that also ends a statement on a frozen server (which still acknowledges TCP). Such a request answers 503 with Retry-After. Below REQUEST_TIMEOUT; a /rest/v1 query is cut at the shorter of this and DATA_API_STATEMENT_TIMEOUT. Workers are bounded by each job kind's timeout instead; long-poll waits and LISTEN are not statements."},
	{Name: "TRUSTED_PROXIES", Default: "", Meaning: "Comma-separated proxy IPs/CIDRs whose X-Forwarded-For is trusted for the client IP (per-IP rate limits)."},
	{Name: "WEBHOOK_CONCURRENCY", Default: "200", Meaning: "Concurrent webhook pushes per worker process (the `webhooks` queue's MaxWorkers); pushes are I/O-bound."},
	{Name: "WEBHOOK_ACCOUNT_CONCURRENCY", Default: strconv.Itoa(webhook.DefaultAccountConcurrency), Meaning: "Webhook pushes of one account in flight at once, per worker process. A push over it waits (its job is snoozed for a short, growing, jittered delay, without using an attempt or holding a worker), so one account's slow endpoints cost only that account. Set it below WEBHOOK_CONCURRENCY."},
	{Name: "WEBHOOK_HOST_CONCURRENCY", Default: strconv.Itoa(webhook.DefaultHostConcurrency), Meaning: "Webhook pushes to one destination host name (any port, any account) in flight at once, per worker process; a push over it waits as over WEBHOOK_ACCOUNT_CONCURRENCY. Bounds what several accounts pointing at one slow host can take."},
	{Name: "PROVIDER_ACCOUNT_CONCURRENCY", Default: "", Meaning: "Sending-provider payload jobs (normalising bounces, deliveries, complaints) of one account running at once, per worker process. A job over it waits (it is snoozed for a short, growing, jittered delay, without using an attempt or holding a worker), so one account's flood of provider webhooks takes at most this many of the default queue's workers and the other accounts' payloads are normalised beside it. Empty: half of WORKER_CONCURRENCY, rounded up (50)."},
	{Name: "JOB_RESCUE_AFTER", Default: "90s", Meaning: "How long a River job may stay running before the rescuer (on the leader worker) treats its process as dead and retries it; a dead worker's jobs wait this plus up to 30 s. Every job kind ends within 1m (its timeout), so 90s never rescues a healthy job; shorter values also cut jobs off at this duration and may run a job that is still finishing twice."},
	{Name: "WORKER_CONCURRENCY", Default: "100", Meaning: "River workers per queue in a `worker` process."},
	{Name: "UI_ADDR", Default: "127.0.0.1:8081", Meaning: "Address where `mailwatch ui` (and `dev`) serve River UI, behind authentication: an admin API key (Bearer, or as the basic-auth password) or UI_BASIC_AUTH_USER/UI_BASIC_AUTH_PASSWORD."},
	{Name: "UI_BASIC_AUTH_USER", Default: "", Meaning: "User name for basic auth on River UI (with UI_BASIC_AUTH_PASSWORD); unset: only admin API keys get in."},
	{Name: "UI_BASIC_AUTH_PASSWORD", Default: "", Secret: true, Meaning: "Password for UI_BASIC_AUTH_USER, at least 12 characters (compared as SHA-256 digests in constant time)."},
	{Name: "JWT_ISSUER", Default: "", Meaning: "iss claim of the data-API tokens mailwatch issues (POST /api/auth/token); empty means PUBLIC_BASE_URL, or `mailwatch` when that is empty too."},
	{Name: "JWT_AUDIENCE", Default: "authenticated", Meaning: "aud claim of the tokens mailwatch issues, required when verifying them (PostgREST's jwt-aud)."},
	{Name: "JWT_TTL", Default: "15m", Meaning: "Lifetime of an issued token; at most 15m."},
	{Name: "JWT_KEY_ROTATION", Default: "720h", Meaning: "How long a signing key signs before the rotation job promotes the next one; at least 1h. Retired keys verify until their tokens expire."},
	{Name: "DATA_API_MAX_ROWS", Default: "1000", Meaning: "Most rows one /rest/v1 request returns (a larger or missing limit is capped to it)."},
	{Name: "DATA_API_STATEMENT_TIMEOUT", Default: "5s", Meaning: "Postgres statement_timeout of a /rest/v1 query."},
	{Name: "SMTP_RELAY_URL", Default: "", Secret: true, Meaning: "SMTP relay for notification mail (alerts, daily digests, address verification): `smtps://user:pass@host:465` (implicit TLS) or `smtp://user:pass@host:587` (STARTTLS, required except for a loopback host such as `smtp://127.0.0.1:25`, which is plain SMTP); credentials percent-encoded, sent with SASL PLAIN. Unset: mail jobs log that they skipped and complete; nothing else changes."},
	{Name: "NOTIFY_FROM", Default: "", Meaning: "From address of notification mail, e.g. `mailwatch <alerts@example.com>`; empty means `mailwatch <notifications@INBOUND_DOMAIN>`. Links in the mail point to the dashboard at PUBLIC_BASE_URL, or http://localhost:<port of LISTEN_ADDR> when that is empty."},
	{Name: "STRIPE_WEBHOOK_SECRET", Default: "", Secret: true, Meaning: "Stripe webhook signing secret (whsec_...) that verifies Stripe-Signature on POST /api/webhooks/payments/stripe; unset: that route answers 503."},
	{Name: "STRIPE_PRICE_PLANS", Default: "", Meaning: "Comma-separated price_id=plan pairs mapping Stripe price ids to plans (free, pro, business, unlimited), e.g. price_abc=pro,price_def=business; a subscription to an unmapped price counts as free."},
	{Name: "DEFAULT_PLAN", Default: "", Meaning: "The plan of every account that no Stripe subscription and no operator placed on a plan: free, pro, business or unlimited (no count limits; events kept EVENT_RETENTION_DAYS). Empty: free when STRIPE_WEBHOOK_SECRET or STRIPE_PRICE_PLANS is set (plans are sold), unlimited otherwise (a team's own instance); set it alike on every process. Read at use: changing it moves every such account."},
	{Name: "BILLING_GRACE_PERIOD", Default: "168h", Meaning: "How long an account whose Stripe payment failed (invoice.payment_failed) keeps its plan before a periodic job moves it to the default plan (DEFAULT_PLAN); counted from the first failure, ended by invoice.paid."},
	{Name: "LOG_LEVEL", Default: "info", Meaning: "debug, info, warn or error."},
	{Name: "LOG_FORMAT", Default: "json", Meaning: "json or text."},
}

// Config is the parsed configuration.
type Config struct {
	DatabaseURL             string
	DatabaseReadURL         string
	DatabaseReadMaxLag      time.Duration
	ListenAddr              string
	MetricsAddr             string
	SMTPAddr                string
	InboundDomain           string
	InboundMXHost           string
	SMTPMaxMessageBytes     int64
	SMTPTLSCert             string
	SMTPTLSKey              string
	SMTPMaxConnections      int
	SMTPMaxConnectionsPerIP int
	SMTPSessionTimeout      time.Duration
	PublicBaseURL           string
	SMTPRelayURL            string
	NotifyFrom              string
	SecretKey               []byte
	PreviousSecretKeys      [][]byte
	RedisURL                string
	DNSResolver             string
	BlocklistZones          string
	BlocklistResolver       string
	DNSCheckInterval        time.Duration
	// SMTPProbe, SMTPProbePort and SMTPProbeCAFile configure the MX
	// transport probes (internal/transport).
	SMTPProbe       bool
	SMTPProbePort   int
	SMTPProbeCAFile string
	// SpamdAddr, RspamdURL and RspamdPassword configure the spam score of
	// the deliverability analysis (internal/spamcheck).
	SpamdAddr               string
	RspamdURL               string
	RspamdPassword          string
	HealthHistoryDays       int
	WebhookAllowedCIDRs     string
	ChannelAllowedHosts     string
	InboundWebhookSecret    string
	TwilioAuthToken         string
	EventRetentionDays      int
	EventsPageCacheTTL      time.Duration
	EventsPageCacheBytes    int
	RateLimitPerMinute      int
	IngressRatePerMinute    int
	RequestTimeout          time.Duration
	BodyLimitBytes          int
	ShutdownTimeout         time.Duration
	DBMaxConns              int
	DBStatementTimeout      time.Duration
	TrustedProxies          []string
	WorkerConcurrency       int
	WebhookConcurrency      int
	WebhookLimits           webhook.Limits
	JobRescueAfter          time.Duration
	UIAddr                  string
	UIBasicAuthUser         string
	UIBasicAuthPassword     string
	ProviderWebhookMaxAge   time.Duration
	JWTIssuer               string
	JWTAudience             string
	JWTTTL                  time.Duration
	JWTKeyRotation          time.Duration
	DataAPIMaxRows          int
	DataAPIStatementTimeout time.Duration
	StripeWebhookSecret     string
	StripePricePlans        plans.PriceMap
	DefaultPlan             string
	BillingGracePeriod      time.Duration
	LogLevel                slog.Level
	LogFormat               string
	GeneratedSecretKeyNote  bool

	// ProviderAccountConcurrency is PROVIDER_ACCOUNT_CONCURRENCY; zero
	// (unset) means half of the default queue's workers, rounded up.
	ProviderAccountConcurrency int
}

// Lookup returns the value of an environment variable.
type Lookup func(name string) (string, bool)

// FromEnv reads the configuration from the process environment.
func FromEnv() (*Config, error) { return Parse(os.LookupEnv) }

// Parse reads the configuration through lookup, applying defaults. Every
// problem is reported, not just the first.
func Parse(lookup Lookup) (*Config, error) {
	get := func(name string) string {
		if v, ok := lookup(name); ok && v != "" {
			return v
		}
		for _, v := range Vars {
			if v.Name == name {
				return v.Default
			}
		}
		panic("config: undeclared variable " + name)
	}
	var errs []error
	atoi := func(name string, min, max int) int {
		n, err := strconv.Atoi(get(name))
		if err != nil || n < min || n > max {
			errs = append(errs, fmt.Errorf("%s must be a whole number from %d to %d", name, min, max))
		}
		return n
	}
	duration := func(name string) time.Duration {
		d, err := time.ParseDuration(get(name))
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 30s", name))
		}
		return d
	}

	cfg := &Config{
		DatabaseURL:             get("DATABASE_URL"),
		DatabaseReadURL:         get("DATABASE_READ_URL"),
		DatabaseReadMaxLag:      duration("DATABASE_READ_MAX_LAG"),
		ListenAddr:              get("LISTEN_ADDR"),
		MetricsAddr:             get("METRICS_ADDR"),
		SMTPAddr:                get("SMTP_ADDR"),
		InboundDomain:           strings.ToLower(strings.TrimSuffix(get("INBOUND_DOMAIN"), ".")),
		InboundMXHost:           strings.ToLower(strings.TrimSuffix(get("INBOUND_MX_HOST"), ".")),
		SMTPMaxMessageBytes:     int64(atoi("SMTP_MAX_MESSAGE_BYTES", 1024, 25<<20)),
		SMTPTLSCert:             get("SMTP_TLS_CERT"),
		SMTPTLSKey:              get("SMTP_TLS_KEY"),
		SMTPMaxConnections:      atoi("SMTP_MAX_CONNECTIONS", 1, 1_000_000),
		SMTPMaxConnectionsPerIP: atoi("SMTP_MAX_CONNECTIONS_PER_IP", 1, 1_000_000),
		SMTPSessionTimeout:      duration("SMTP_SESSION_TIMEOUT"),
		PublicBaseURL:           strings.TrimSuffix(get("PUBLIC_BASE_URL"), "/"),
		SMTPRelayURL:            get("SMTP_RELAY_URL"),
		NotifyFrom:              get("NOTIFY_FROM"),
		RedisURL:                get("REDIS_URL"),
		DNSResolver:             get("DNS_RESOLVER"),
		BlocklistZones:          get("BLOCKLIST_ZONES"),
		BlocklistResolver:       get("BLOCKLIST_RESOLVER"),
		DNSCheckInterval:        duration("DNS_CHECK_INTERVAL"),
		HealthHistoryDays:       atoi("HEALTH_HISTORY_DAYS", 1, 3650),
		WebhookAllowedCIDRs:     get("WEBHOOK_ALLOWED_CIDRS"),
		ChannelAllowedHosts:     get("CHANNEL_ALLOWED_HOSTS"),
		InboundWebhookSecret:    get("INBOUND_WEBHOOK_SECRET"),
		TwilioAuthToken:         get("TWILIO_AUTH_TOKEN"),
		EventRetentionDays:      atoi("EVENT_RETENTION_DAYS", 7, 3650),
		EventsPageCacheBytes:    atoi("EVENTS_PAGE_CACHE_BYTES", 0, 1<<34),
		RateLimitPerMinute:      atoi("RATE_LIMIT_PER_MINUTE", 1, 1_000_000),
		IngressRatePerMinute:    atoi("INGRESS_RATE_LIMIT_PER_MINUTE", 1, 1_000_000),
		RequestTimeout:          duration("REQUEST_TIMEOUT"),
		BodyLimitBytes:          atoi("BODY_LIMIT_BYTES", 1024, 1<<30),
		ShutdownTimeout:         duration("SHUTDOWN_TIMEOUT"),
		DBMaxConns:              atoi("DB_MAX_CONNS", 2, 1000),
		DBStatementTimeout:      duration("DB_STATEMENT_TIMEOUT"),
		WorkerConcurrency:       atoi("WORKER_CONCURRENCY", 1, 10_000),
		WebhookConcurrency:      atoi("WEBHOOK_CONCURRENCY", 1, 10_000),
		JobRescueAfter:          duration("JOB_RESCUE_AFTER"),
		UIAddr:                  get("UI_ADDR"),
		UIBasicAuthUser:         get("UI_BASIC_AUTH_USER"),
		UIBasicAuthPassword:     get("UI_BASIC_AUTH_PASSWORD"),
		LogFormat:               get("LOG_FORMAT"),
		JWTIssuer:               get("JWT_ISSUER"),
		JWTAudience:             get("JWT_AUDIENCE"),
		JWTTTL:                  duration("JWT_TTL"),
		JWTKeyRotation:          duration("JWT_KEY_ROTATION"),
		DataAPIMaxRows:          atoi("DATA_API_MAX_ROWS", 1, 100_000),
		DataAPIStatementTimeout: duration("DATA_API_STATEMENT_TIMEOUT"),
		StripeWebhookSecret:     get("STRIPE_WEBHOOK_SECRET"),
		BillingGracePeriod:      duration("BILLING_GRACE_PERIOD"),
	}
	cfg.WebhookLimits = webhook.Limits{
		PerAccount: atoi("WEBHOOK_ACCOUNT_CONCURRENCY", 1, 10_000),
		PerHost:    atoi("WEBHOOK_HOST_CONCURRENCY", 1, 10_000),
	}
	if get("PROVIDER_ACCOUNT_CONCURRENCY") != "" {
		cfg.ProviderAccountConcurrency = atoi("PROVIDER_ACCOUNT_CONCURRENCY", 1, 10_000)
	}
	if m, err := plans.ParsePriceMap(get("STRIPE_PRICE_PLANS")); err != nil {
		errs = append(errs, fmt.Errorf("STRIPE_PRICE_PLANS: %w", err))
	} else {
		cfg.StripePricePlans = m
	}
	// Billing counts as configured when either Stripe setting is: the API
	// holds the secret and the workers the price map, and every role must
	// resolve the same default.
	if p, err := plans.Default(get("DEFAULT_PLAN"), cfg.StripeWebhookSecret != "" || len(cfg.StripePricePlans) > 0); err != nil {
		errs = append(errs, fmt.Errorf("DEFAULT_PLAN: %w", err))
	} else {
		cfg.DefaultPlan = p
	}
	if cfg.JWTIssuer == "" {
		cfg.JWTIssuer = cfg.PublicBaseURL
	}
	if cfg.JWTIssuer == "" {
		cfg.JWTIssuer = "mailwatch"
	}
	if cfg.JWTTTL > 15*time.Minute {
		errs = append(errs, errors.New("JWT_TTL must be at most 15m"))
	}
	if cfg.JWTKeyRotation > 0 && cfg.JWTKeyRotation < time.Hour {
		errs = append(errs, errors.New("JWT_KEY_ROTATION must be at least 1h"))
	}
	if s := get("TRUSTED_PROXIES"); s != "" {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				cfg.TrustedProxies = append(cfg.TrustedProxies, p)
			}
		}
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(get("LOG_LEVEL"))); err != nil {
		errs = append(errs, errors.New("LOG_LEVEL must be debug, info, warn or error"))
	}
	if d, err := time.ParseDuration(get("EVENTS_PAGE_CACHE_TTL")); err != nil || d < 0 || d > time.Minute {
		errs = append(errs, errors.New("EVENTS_PAGE_CACHE_TTL must be a duration from 0 to 1m"))
	} else {
		cfg.EventsPageCacheTTL = d
	}
	if d, err := time.ParseDuration(get("PROVIDER_WEBHOOK_MAX_AGE")); err != nil || d < 0 || d > esp.MaxAgeLimit {
		errs = append(errs, fmt.Errorf("PROVIDER_WEBHOOK_MAX_AGE must be a duration from 0 to %s (half the replay-key retention), such as 72h", fmtHours(esp.MaxAgeLimit)))
	} else {
		cfg.ProviderWebhookMaxAge = d
	}
	switch strings.ToLower(get("SMTP_PROBE")) {
	case "on", "true", "1":
		cfg.SMTPProbe = true
	case "off", "false", "0":
	default:
		errs = append(errs, errors.New("SMTP_PROBE must be on or off"))
	}
	cfg.SMTPProbePort = atoi("SMTP_PROBE_PORT", 1, 65535)
	cfg.SMTPProbeCAFile = get("SMTP_PROBE_CA_FILE")
	cfg.SpamdAddr, cfg.RspamdURL, cfg.RspamdPassword = get("SPAMD_ADDR"), get("RSPAMD_URL"), get("RSPAMD_PASSWORD")
	if cfg.SpamdAddr != "" && cfg.RspamdURL != "" {
		errs = append(errs, errors.New("set one of SPAMD_ADDR and RSPAMD_URL, not both"))
	}
	if u, err := url.Parse(cfg.RspamdURL); cfg.RspamdURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		errs = append(errs, errors.New("RSPAMD_URL must be an http or https URL, e.g. http://127.0.0.1:11333"))
	}
	if cfg.DBStatementTimeout > 0 && cfg.RequestTimeout > 0 && cfg.DBStatementTimeout+time.Second >= cfg.RequestTimeout {
		errs = append(errs, errors.New("DB_STATEMENT_TIMEOUT must be more than a second below REQUEST_TIMEOUT"))
	}
	if _, err := blocklist.Lists(cfg.BlocklistZones); err != nil {
		errs = append(errs, fmt.Errorf("BLOCKLIST_ZONES: %w", err))
	}
	if cfg.DNSCheckInterval > 0 && cfg.DNSCheckInterval < time.Minute {
		errs = append(errs, errors.New("DNS_CHECK_INTERVAL must be at least 1m"))
	}
	if cfg.NotifyFrom == "" {
		cfg.NotifyFrom = "mailwatch <notifications@" + cfg.InboundDomain + ">"
	}
	if a, err := mail.ParseAddress(cfg.NotifyFrom); err != nil || !strings.Contains(a.Address, "@") {
		errs = append(errs, errors.New("NOTIFY_FROM must be an address such as mailwatch <alerts@example.com>"))
	}
	if s := cfg.SMTPRelayURL; s != "" {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" {
			errs = append(errs, errors.New("SMTP_RELAY_URL must be smtp://[user:pass@]host[:port] (STARTTLS) or smtps://[user:pass@]host[:port] (implicit TLS)"))
		}
	}
	if cfg.SMTPMaxConnectionsPerIP > cfg.SMTPMaxConnections {
		errs = append(errs, errors.New("SMTP_MAX_CONNECTIONS_PER_IP must be at most SMTP_MAX_CONNECTIONS"))
	}
	if d := cfg.SMTPSessionTimeout; d > 0 && (d < time.Minute || d > time.Hour) {
		errs = append(errs, errors.New("SMTP_SESSION_TIMEOUT must be a duration from 1m to 1h"))
	}
	if (cfg.SMTPTLSCert == "") != (cfg.SMTPTLSKey == "") {
		errs = append(errs, errors.New("SMTP_TLS_CERT and SMTP_TLS_KEY must be set together"))
	}
	if (cfg.UIBasicAuthUser == "") != (cfg.UIBasicAuthPassword == "") {
		errs = append(errs, errors.New("UI_BASIC_AUTH_USER and UI_BASIC_AUTH_PASSWORD must be set together"))
	} else if cfg.UIBasicAuthPassword != "" && len(cfg.UIBasicAuthPassword) < 12 {
		errs = append(errs, errors.New("UI_BASIC_AUTH_PASSWORD must be at least 12 characters"))
	}
	if cfg.LogFormat != "json" && cfg.LogFormat != "text" {
		errs = append(errs, errors.New("LOG_FORMAT must be json or text"))
	}
	if s := get("MAILWATCH_SECRET_KEY"); s != "" {
		key, err := DecodeKey(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("MAILWATCH_SECRET_KEY: %w", err))
		}
		cfg.SecretKey = key
	}
	if s := get("MAILWATCH_SECRET_KEY_PREVIOUS"); s != "" {
		for _, part := range strings.Split(s, ",") {
			key, err := DecodeKey(strings.TrimSpace(part))
			if err != nil {
				errs = append(errs, fmt.Errorf("MAILWATCH_SECRET_KEY_PREVIOUS: %w", err))
				continue
			}
			cfg.PreviousSecretKeys = append(cfg.PreviousSecretKeys, key)
		}
	}
	return cfg, errors.Join(errs...)
}

// DecodeKey decodes a 32-byte key given in standard base64.
func DecodeKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("must be standard base64")
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("must decode to 32 bytes, got %d", len(key))
	}
	return key, nil
}

// Require reports an error naming each of the given settings that is empty.
func (c *Config) Require(names ...string) error {
	var errs []error
	for _, n := range names {
		switch n {
		case "DATABASE_URL":
			if c.DatabaseURL == "" {
				errs = append(errs, errors.New("DATABASE_URL is required"))
			}
		case "MAILWATCH_SECRET_KEY":
			if len(c.SecretKey) == 0 {
				errs = append(errs, errors.New("MAILWATCH_SECRET_KEY is required (32 bytes, base64); generate one with: head -c32 /dev/urandom | base64"))
			}
		}
	}
	return errors.Join(errs...)
}

// Redacted returns the effective settings with secret values masked, sorted
// by name, for logging at start-up.
func Redacted(lookup Lookup) map[string]string {
	out := make(map[string]string, len(Vars))
	for _, v := range Vars {
		val, ok := lookup(v.Name)
		if !ok || val == "" {
			val = v.Default
		}
		if v.Secret && val != "" {
			val = "[redacted]"
		}
		out[v.Name] = val
	}
	return out
}

// MarkdownTable renders Vars as the table of docs/configuration.md.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Secret | Meaning |\n|---|---|---|---|\n")
	for _, v := range Vars {
		def := v.Default
		if def == "" {
			def = "(empty)"
		} else {
			def = "`" + def + "`"
		}
		secret := ""
		if v.Secret {
			secret = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, secret, v.Meaning)
	}
	return b.String()
}
