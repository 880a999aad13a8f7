// Package jobs holds mailwatch's River job kinds, their workers and the
// client configuration every role shares.
//
// Job args carry identifiers only, never secrets or payloads: a worker
// reads the current state of its rows when it runs, so whoever triggers a
// run (the API, River's scheduler, an operator in River UI, the rescuer)
// the rows converge.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/fairwait"
	"github.com/mailwatch/mailwatch/internal/logthrottle"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/reputation"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/spamcheck"
	"github.com/mailwatch/mailwatch/internal/transport"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// MaxJobTimeout is the longest any job kind may run before River cancels
// its context: River's JobTimeout for every kind, and the most a kind's own
// Timeout may declare (DomainCheckWorker's is exactly this). A webhook push
// is bounded well inside it by its HTTP timeout (15 s) and the bounded
// transaction that records it.
const MaxJobTimeout = time.Minute

// rescueMargin is how much longer than MaxJobTimeout the rescue window must
// be, so that a job cancelled at its timeout has returned and been recorded
// before the rescuer could take it for dead.
const rescueMargin = 30 * time.Second

// riverLogEvery is how often River may repeat one warning or error.
const riverLogEvery = 30 * time.Second

// riverLogger is the logger River gets: warnings throttled, routine
// periodic lines at debug; nil for nil.
func riverLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(logthrottle.Demote(logthrottle.New(l.Handler(), riverLogEvery), logthrottle.RiverRoutine...))
}

// DefaultRescueAfter is JOB_RESCUE_AFTER's default: the shortest window
// that never rescues (and so never duplicates) a healthy job, since every
// job ends within MaxJobTimeout. A dead worker's jobs are retried after it
// plus up to River's 30 s rescuer interval.
const DefaultRescueAfter = MaxJobTimeout + rescueMargin

// Deps is what workers need: the database, a clock and a log, the
// settings they read, and the outside world each capability reaches.
type Deps struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	Now    func() time.Time
	// Settings are the few settings the workers read; zero values are the
	// defaults.
	Settings Settings
	// Keyring decrypts subscription signing secrets.
	Keyring *secretbox.Keyring
	// WebhookClient pushes deliveries (SSRF-guarded, no redirects).
	WebhookClient *http.Client
	// Resolver answers DNS checks.
	Resolver dnscheck.Resolver
	// MTASTSClient fetches MTA-STS policies; nil means
	// dnscheck.NewHTTPClient over Resolver.
	MTASTSClient *http.Client
	// Registry receives worker metrics; may be nil.
	Registry *prometheus.Registry
	// Observer, when set, watches a working client's fetches, jobs and
	// leadership (observer.go); nil in tests and insert-only clients.
	Observer *Observer
	// DNSFix writes DNS recommendations and verifies MX setups; nil
	// leaves them unconfigured (their jobs fail and say so).
	DNSFix *domains.FixDeps
	// SNSClient confirms SNS subscriptions (ses.AWSOnlyClient over the
	// SSRF-guarded client).
	SNSClient *http.Client
	// Mail sends notification mail (notify.go); nil or without a relay,
	// the mail jobs log that they skipped and complete.
	Mail *notify.Mailer
	// Transport probes MX hosts (transport.go); nil when SMTP_PROBE is
	// off: no probe is scheduled and queued ones complete without probing.
	Transport *transport.Service

	// Reputation checks domains on DNS blocklists (reputation.go); nil
	// leaves it unconfigured (its jobs fail and say so).
	Reputation *reputation.Checker

	// Spam scores received messages in their deliverability analysis
	// (SPAMD_ADDR or RSPAMD_URL); nil skips the analysis's spam section.
	Spam spamcheck.Checker

	// ChannelHosts is where notification channels may send
	// (CHANNEL_ALLOWED_HOSTS); nil means each kind's built-in hosts.
	ChannelHosts *channels.AllowList

	// observeProviderGate, when set, sees each admission of a
	// provider_payload job by its account's bound (tests).
	observeProviderGate func(account uuid.UUID, running int)
	// analysisAccountConcurrency bounds the analysis jobs of one account
	// running at once in the process: half the queue's MaxWorkers
	// (fairwait.Share), set by NewClient; tests set it lower.
	analysisAccountConcurrency int
	// observeAnalysisGate is observeProviderGate for the analysis jobs.
	observeAnalysisGate func(account uuid.UUID, running int)
}

// Settings are the configuration the workers read (SettingsFrom takes them
// from the process's); a zero field means its default.
type Settings struct {
	// InboundDomain signs the reporting addresses the DNS checks look for.
	InboundDomain string
	// EventRetentionDays caps every plan's event retention.
	EventRetentionDays int
	// DefaultPlan is the plan of accounts without one of their own.
	DefaultPlan string
	// StripePricePlans and BillingGracePeriod configure the billing applier.
	StripePricePlans   plans.PriceMap
	BillingGracePeriod time.Duration
	// DNSCheckInterval is how often each domain is checked.
	DNSCheckInterval time.Duration
	// HealthHistoryDays is how long health scores are kept.
	HealthHistoryDays int
	// JobRescueAfter is River's rescue window (JOB_RESCUE_AFTER).
	JobRescueAfter time.Duration
	// WebhookLimits bound the pushes in flight per account and per host.
	WebhookLimits webhook.Limits
	// ProviderAccountConcurrency bounds the provider_payload jobs of one
	// account running at once (PROVIDER_ACCOUNT_CONCURRENCY); zero means
	// providers.AccountConcurrency of the default queue's MaxWorkers.
	ProviderAccountConcurrency int
	// JWTKeyRotation and JWTTTL drive the signing-key rotation.
	JWTKeyRotation time.Duration
	JWTTTL         time.Duration
}

// SettingsFrom takes the workers' settings from the process's.
func SettingsFrom(cfg *config.Config) Settings {
	return Settings{
		InboundDomain: cfg.InboundDomain, EventRetentionDays: cfg.EventRetentionDays, DefaultPlan: cfg.DefaultPlan,
		StripePricePlans: cfg.StripePricePlans, BillingGracePeriod: cfg.BillingGracePeriod,
		DNSCheckInterval: cfg.DNSCheckInterval, HealthHistoryDays: cfg.HealthHistoryDays,
		JobRescueAfter: cfg.JobRescueAfter, WebhookLimits: cfg.WebhookLimits, ProviderAccountConcurrency: cfg.ProviderAccountConcurrency,
		JWTKeyRotation: cfg.JWTKeyRotation, JWTTTL: cfg.JWTTTL,
	}
}

// withDefaults fills what a caller may leave unset, once for every
// worker: the wall clock and the process's default logger.
func (d Deps) withDefaults() Deps {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return d
}

// Options tune a client.
type Options struct {
	// Concurrency is MaxWorkers per queue; zero makes an insert-only client.
	Concurrency int
	// FetchCooldown is lowered from River's 100 ms so that a job inserted by
	// the API starts within milliseconds (measured: see docs/benchmarks.md): it applies both
	// to the inserting client's notify debounce and to the fetch loop.
	FetchCooldown time.Duration
	// WithPeriodic enables the periodic jobs (every worker process may set
	// it; River elects one leader to enqueue them).
	WithPeriodic bool
	// Queues limits the queues worked; empty means queues.All.
	Queues []string
	// WebhookConcurrency is MaxWorkers of the webhooks queue; pushes are
	// I/O-bound, so it is sized apart from the rest. Zero means Concurrency.
	WebhookConcurrency int
}

// Workers returns every registered worker.
func Workers(deps Deps) *river.Workers {
	deps = deps.withDefaults()
	w := river.NewWorkers()
	river.AddWorker(w, &UsagePruneWorker{deps: deps})
	addEventWorkers(w, deps)      // events.go
	addWebhookWorkers(w, deps)    // webhooks.go
	addRecoverWorkers(w, deps)    // webhooks_recover.go
	addReceiverWorkers(w, deps)   // receivers.go
	addDomainWorkers(w, deps)     // domains.go
	addDNSFixWorkers(w, deps)     // dnsfix.go
	addTransportWorkers(w, deps)  // transport.go
	addProviderWorkers(w, deps)   // providers.go
	addSigningKeyWorkers(w, deps) // signingkeys.go
	addReportWorkers(w, deps)     // reports.go
	addNotifyWorkers(w, deps)     // notify.go
	addWeeklyWorkers(w, deps)     // weekly.go
	addBillingWorkers(w, deps)    // billing.go
	addAdminWorkers(w, deps)      // admin.go
	addPartitionWorkers(w, deps)  // partitions.go
	addReputationWorkers(w, deps) // reputation.go
	addChannelWorkers(w, deps)    // channels.go
	return w
}

// PeriodicJobs returns the schedules a leader enqueues.
func PeriodicJobs(deps Deps) []*river.PeriodicJob {
	deps = deps.withDefaults()
	out := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return UsagePruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "usage_prune"}),
	}
	out = append(out, eventPeriodicJobs(deps)...)
	out = append(out, webhookPeriodicJobs(deps)...)
	out = append(out, receiverPeriodicJobs(deps)...)
	out = append(out, domainPeriodicJobs(deps)...)
	out = append(out, dnsFixPeriodicJobs(deps)...)
	out = append(out, providerPeriodicJobs(deps)...)
	out = append(out, signingKeyPeriodicJobs(deps)...)
	out = append(out, notifyPeriodicJobs(deps)...)
	out = append(out, weeklyPeriodicJobs(deps)...)
	out = append(out, billingPeriodicJobs(deps)...)
	out = append(out, reportPeriodicJobs(deps)...)
	out = append(out, partitionPeriodicJobs(deps)...)
	out = append(out, transportPeriodicJobs(deps)...)
	out = append(out, reputationPeriodicJobs(deps)...)
	return out
}

// NewClient returns a River client. With opts.Concurrency zero it only
// inserts jobs (the API's client); otherwise it works every queue.
func NewClient(deps Deps, opts Options) (*river.Client[pgx.Tx], error) {
	if opts.FetchCooldown == 0 {
		opts.FetchCooldown = 10 * time.Millisecond
	}
	if deps.Settings.ProviderAccountConcurrency <= 0 {
		// The default queue's MaxWorkers (below); an insert-only client
		// runs no job.
		deps.Settings.ProviderAccountConcurrency = providers.AccountConcurrency(opts.Concurrency)
	}
	if deps.analysisAccountConcurrency <= 0 {
		deps.analysisAccountConcurrency = fairwait.Share(opts.Concurrency)
	}
	cfg := &river.Config{
		// River retries every loop against a lost database (each queue's
		// fetch every 200 ms): one line per message per 30 s, with a count.
		// Its producer's periodic job counts go to debug.
		Logger:        riverLogger(deps.Logger),
		Workers:       Workers(deps),
		FetchCooldown: opts.FetchCooldown,
		// A job whose process died is retried after minutes, not River's
		// default hour (JOB_RESCUE_AFTER).
		RescueStuckJobsAfter: DefaultRescueAfter,
	}
	warn := deps.Logger != nil
	deps = deps.withDefaults()
	if deps.Settings.JobRescueAfter > 0 {
		cfg.RescueStuckJobsAfter = deps.Settings.JobRescueAfter
	}
	// River refuses a rescue delay shorter than the job timeout.
	cfg.JobTimeout = min(MaxJobTimeout, cfg.RescueStuckJobsAfter)
	if opts.Concurrency > 0 && cfg.RescueStuckJobsAfter < DefaultRescueAfter && warn {
		deps.Logger.Warn("JOB_RESCUE_AFTER is shorter than the longest job timeout plus 30 s: jobs are cut off at it, "+
			"and a job still finishing when it passes may be rescued and run twice",
			slog.Duration("job_rescue_after", cfg.RescueStuckJobsAfter), slog.Duration("safe_minimum", DefaultRescueAfter))
	}
	if opts.Concurrency > 0 {
		cfg.FetchPollInterval = 200 * time.Millisecond
		worked := opts.Queues
		if len(worked) == 0 {
			worked = queues.All
		}
		cfg.Queues = map[string]river.QueueConfig{}
		for _, q := range worked {
			n := opts.Concurrency
			switch q {
			case queues.Maintenance:
				n = min(n, 4)
			case queues.Webhooks:
				if opts.WebhookConcurrency > 0 {
					n = opts.WebhookConcurrency
				}
			}
			cfg.Queues[q] = river.QueueConfig{MaxWorkers: n}
		}
		if opts.WithPeriodic {
			cfg.PeriodicJobs = PeriodicJobs(deps)
		}
		if deps.Observer != nil {
			deps.Observer.configure(cfg)
		}
	}
	client, err := river.NewClient(riverpgxv5.New(deps.Pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("error creating River client: %w", err)
	}
	return client, nil
}

// usageRetention is how long per-day API usage is kept.
const usageRetention = 400 * 24 * time.Hour

// UsagePruneArgs prunes old usage counters and long-revoked keys.
type UsagePruneArgs struct{}

// Kind implements river.JobArgs.
func (UsagePruneArgs) Kind() string { return "usage_prune" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (UsagePruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// UsagePruneWorker works UsagePruneArgs.
type UsagePruneWorker struct {
	river.WorkerDefaults[UsagePruneArgs]
	deps Deps
}

// Work deletes usage rows older than the retention, then revoked keys that
// no usage row refers to any more.
func (w *UsagePruneWorker) Work(ctx context.Context, job *river.Job[UsagePruneArgs]) error {
	now := w.deps.Now
	cutoff := now().UTC().Add(-usageRetention)
	rows, err := pruneUsage(ctx, w.deps.Pool, cutoff)
	if err != nil {
		return err
	}
	w.deps.Logger.InfoContext(ctx, "pruned API usage", slog.Int64("rows", rows), slog.Time("before", cutoff))
	return nil
}
