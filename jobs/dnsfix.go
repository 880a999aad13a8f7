package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/spf"
)

// DNSFixDeps is what DNS fixes need from the world.
type DNSFixDeps struct {
	// Env talks to DNS providers (credentials keyring, SSRF guard).
	Env *dnsfix.Env
	// Inputs returns a domain's inputs besides its checks (known), read
	// on db: the signed reporting addresses and the DMARC enforcement
	// readiness (ReportInputs builds it from the reports). nil means
	// none: DMARC records are proposed without mailwatch's rua and no
	// policy step is recommended.
	Inputs func(ctx context.Context, db dbsqlc.DBTX, d dbsqlc.Domain, known *dnscheck.Results, now time.Time) dnsfix.Inputs
	// MX is the MX setup verification's configuration.
	MX dnsfix.MXConfig
	// SkipRecompute turns the recomputation after each check off; only
	// the dns benchmark sets it, to measure the check path without it.
	SkipRecompute atomic.Bool
}

// DNSFixApplyArgs writes one recommendation through its domain's DNS
// connection.
type DNSFixApplyArgs struct {
	RecommendationID uuid.UUID `json:"recommendation_id"`
}

// Kind implements river.JobArgs.
func (DNSFixApplyArgs) Kind() string { return "dns_fix_apply" }

// InsertOpts implements river.JobArgsWithInsertOpts: a network failure is
// retried a few times; a conflict or a refusal is final at once.
func (DNSFixApplyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDNS, MaxAttempts: 4}
}

func addDNSFixWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &DNSFixApplyWorker{deps: deps})
	river.AddWorker(w, &MXVerifyWorker{deps: deps})
	river.AddWorker(w, &MXScheduleWorker{deps: deps})
}

func dnsFixPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(MXReverifyInterval), func() (river.JobArgs, *river.InsertOpts) {
			return MXScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "mx_verify_schedule"}),
	}
}

// DNSFixApplyWorker works DNSFixApplyArgs.
type DNSFixApplyWorker struct {
	river.WorkerDefaults[DNSFixApplyArgs]
	deps Deps
}

// Work writes the change outside any transaction, then records the
// outcome (applied or failed, with its event) and, once applied, queues a
// fresh check of the domain, in one transaction that completes the job.
// A recommendation no longer applying (an operator re-ran a finished job)
// is left alone.
func (w *DNSFixApplyWorker) Work(ctx context.Context, job *river.Job[DNSFixApplyArgs]) error {
	if w.deps.DNSFix == nil || w.deps.DNSFix.Env == nil {
		return errors.New("DNS fixes are not configured in this worker")
	}
	out, err := dnsfix.Write(ctx, w.deps.Pool, w.deps.DNSFix.Env, job.Args.RecommendationID)
	writeErr := error(nil)
	if err != nil {
		if job.Attempt < job.MaxAttempts {
			return err
		}
		// The last attempt: record the network failure as the outcome.
		rec, gerr := dbsqlc.New().DNSRecommendationGetByID(ctx, w.deps.Pool, job.Args.RecommendationID)
		if gerr != nil {
			return err
		}
		out, writeErr = &dnsfix.ApplyOutcome{Rec: rec}, fmt.Errorf("the DNS provider could not be reached: %w", err)
	} else if out.Skipped {
		return nil
	} else {
		writeErr = out.Err
	}
	return dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		recorded, err := dnsfix.Finish(ctx, tx, &events.Emitter{}, out, writeErr, w.deps.domainNow())
		if err != nil {
			return err
		}
		if recorded && writeErr == nil {
			client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
			if err != nil {
				return err
			}
			if _, err := client.InsertTx(ctx, tx, DomainCheckArgs{DomainID: out.Rec.DomainID}, nil); err != nil {
				return fmt.Errorf("error queueing the re-check: %w", err)
			}
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// RecomputeDNSFixes recomputes a domain's recommendations from its known
// check results: after every check (the check job and the live lookup
// call it with the domain's row as the check left it). A domain whose SPF
// record is over the lookup limit has it flattened first, with DNS
// answered outside any transaction. A domain with nothing to recommend
// (the common case) costs one statement; otherwise the recommendations
// are stored in one transaction with the domain's row locked.
func RecomputeDNSFixes(ctx context.Context, db dbutil.Executor, resolver dnscheck.Resolver, fx *DNSFixDeps, row dbsqlc.Domain, now time.Time) error {
	known, err := decodeKnown(row)
	if err != nil || known == nil {
		return err
	}
	var in dnsfix.Inputs
	if fx != nil && fx.Inputs != nil {
		in = fx.Inputs(ctx, db, row, known, now)
	}
	if known.SPF != nil && known.SPF.Lookups > spf.MaxLookups && len(known.SPF.Records) == 1 && resolver != nil {
		fctx, cancel := context.WithTimeout(ctx, DomainCheckBudget)
		flat, ferr := dnsfix.Flatten(fctx, resolver, row.Name, known.SPF.Records[0])
		cancel()
		if ferr == nil {
			in.FlatSPF, in.FlatSPFFrom = flat, known.SPF.Records[0]
		}
	}
	q := dbsqlc.New()
	if len(dnsfix.Compute(row.Name, known, in)) == 0 {
		return q.DNSRecommendationClear(ctx, db, row.ID)
	}
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		locked, err := q.DomainGetByIDForUpdate(ctx, tx, row.ID)
		if dbutil.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		known, err := decodeKnown(locked)
		if err != nil || known == nil {
			return err
		}
		_, err = dnsfix.Recompute(ctx, tx, locked, known, in, now)
		return err
	})
}

// ReportInputs is DNSFixDeps.Inputs over the DMARC reports: the domain's
// signed DMARC and TLS-RPT addresses (none until POST .../sign, or
// without a keyring or inboundDomain) and the enforcement readiness of
// GET .../dmarc/guidance. A failure is logged and leaves the inputs it
// could not read empty: recommendations then merely omit them.
func ReportInputs(keyring *secretbox.Keyring, inboundDomain string, logger *slog.Logger) func(ctx context.Context, db dbsqlc.DBTX, d dbsqlc.Domain, known *dnscheck.Results, now time.Time) dnsfix.Inputs {
	svc := &reports.Service{}
	if keyring != nil && inboundDomain != "" {
		svc.Signer = &reports.Signer{Keyring: keyring, Domain: inboundDomain}
	}
	return func(ctx context.Context, db dbsqlc.DBTX, d dbsqlc.Domain, known *dnscheck.Results, now time.Time) dnsfix.Inputs {
		ri, err := svc.DNSInputs(ctx, db, d.ID, d.Name, known, now)
		if err != nil && logger != nil {
			logger.WarnContext(ctx, "reading the DMARC report inputs of DNS recommendations failed", slog.String("domain", d.Name), slog.Any("error", err))
		}
		in := dnsfix.Inputs{ReportAddress: ri.ReportAddress, TLSReportAddress: ri.TLSReportAddress}
		if r := ri.Readiness; r != nil {
			in.Readiness = &dnsfix.Readiness{Ready: r.Ready, NextPolicy: r.NextPolicy, Reason: fmt.Sprintf(
				"%.1f%% of %d legitimate messages reported over the last 30 days pass DMARC (%.0f%% of at least %d needed)",
				r.CompliantShare*100, r.LegitimateMessages, r.RequiredShare*100, r.MinimumMessages)}
		}
		return in
	}
}

func decodeKnown(row dbsqlc.Domain) (*dnscheck.Results, error) {
	if len(row.Known) == 0 {
		return nil, nil
	}
	known := &dnscheck.Results{}
	if err := json.Unmarshal(row.Known, known); err != nil {
		return nil, fmt.Errorf("error decoding known results of %s: %w", row.Name, err)
	}
	return known, nil
}

// recomputeAfterCheck is the check job's hook: a failure is logged, never
// fails the check (the next check recomputes).
func (w *DomainCheckWorker) recomputeAfterCheck(ctx context.Context, row dbsqlc.Domain) {
	if w.deps.DNSFix != nil && w.deps.DNSFix.SkipRecompute.Load() {
		return
	}
	if err := RecomputeDNSFixes(ctx, w.deps.Pool, w.deps.Resolver, w.deps.DNSFix, row, w.deps.domainNow()); err != nil {
		w.deps.domainLogger().WarnContext(ctx, "recomputing DNS recommendations failed", slog.String("domain", row.Name), slog.Any("error", err))
	}
}

// MXReverifyInterval is how often pending, verified and lost MX setups are
// verified again.
const MXReverifyInterval = time.Hour

// MXVerifyArgs verifies one MX setup.
type MXVerifyArgs struct {
	SetupID uuid.UUID `json:"setup_id"`
}

// Kind implements river.JobArgs.
func (MXVerifyArgs) Kind() string { return "mx_verify" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (MXVerifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDNS, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: MXReverifyInterval / 2}}
}

// MXScheduleArgs queues an MXVerifyArgs per setup still to watch.
type MXScheduleArgs struct{}

// Kind implements river.JobArgs.
func (MXScheduleArgs) Kind() string { return "mx_verify_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (MXScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Second}}
}

// MXVerifyWorker works MXVerifyArgs.
type MXVerifyWorker struct {
	river.WorkerDefaults[MXVerifyArgs]
	deps Deps
}

// Work looks the setup's records up and stores the new state (a DNS
// failure is retried, never a state change).
func (w *MXVerifyWorker) Work(ctx context.Context, job *river.Job[MXVerifyArgs]) error {
	if w.deps.Resolver == nil || w.deps.DNSFix == nil {
		return errors.New("MX verification is not configured in this worker")
	}
	s, err := dbsqlc.New().MXSetupGetByIDForUpdate(ctx, w.deps.Pool, job.Args.SetupID)
	if dbutil.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.State == dnsfix.MXFailed {
		return nil
	}
	_, err = dnsfix.VerifyMX(ctx, w.deps.Pool, w.deps.Resolver, &events.Emitter{}, w.deps.DNSFix.MX, s, w.deps.domainNow)
	if errors.Is(err, dnsfix.ErrNotFound) {
		return nil
	}
	return err
}

// MXScheduleWorker works MXScheduleArgs.
type MXScheduleWorker struct {
	river.WorkerDefaults[MXScheduleArgs]
	deps Deps
}

// Work queues a verification of every pending, verified or lost setup.
func (w *MXScheduleWorker) Work(ctx context.Context, job *river.Job[MXScheduleArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	q := dbsqlc.New()
	after := uuid.Nil
	for {
		ids, err := q.MXSetupIDsToVerify(ctx, w.deps.Pool, dbsqlc.MXSetupIDsToVerifyParams{After: after, MaxRows: scheduleBatch})
		if err != nil {
			return fmt.Errorf("error listing MX setups: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: MXVerifyArgs{SetupID: id}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("error queueing MX verifications: %w", err)
		}
		after = ids[len(ids)-1]
	}
}
