package domains

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/spf"
	"github.com/mailwatch/mailwatch/internal/transport"
)

// FixDeps is what DNS fixes need from the world.
type FixDeps struct {
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
}

// RecomputeFixes recomputes a domain's recommendations from its known
// check results: after every check (the check job and the live lookup
// call it with the domain's row as the check left it). A domain whose SPF
// record is over the lookup limit has it flattened first, with DNS
// answered outside any transaction. A domain with nothing to recommend
// (the common case) costs one statement; otherwise the recommendations
// are stored in one transaction with the domain's row locked.
func RecomputeFixes(ctx context.Context, db dbutil.Executor, resolver dnscheck.Resolver, fx *FixDeps, row dbsqlc.Domain, now time.Time) error {
	known, err := decodeKnown(row)
	if err != nil || known == nil {
		return err
	}
	var in dnsfix.Inputs
	if fx != nil && fx.Inputs != nil {
		in = fx.Inputs(ctx, db, row, known, now)
	}
	if known.MTASTS != nil && known.MTASTS.Policy != nil && known.MTASTS.Policy.Mode == "testing" {
		// The MX transport probes say whether enforce would lose mail; a
		// failure to read them leaves the advice out.
		if v, err := transport.Load(ctx, db, row, now); err == nil {
			in.MTASTSSafeToEnforce = v.SafeToEnforce
		}
	}
	if known.SPF != nil && known.SPF.Lookups > spf.MaxLookups && len(known.SPF.Records) == 1 && resolver != nil {
		fctx, cancel := context.WithTimeout(ctx, CheckBudget)
		flat, ferr := dnsfix.Flatten(fctx, resolver, row.Name, known.SPF.Records[0])
		cancel()
		if ferr == nil {
			in.FlatSPF, in.FlatSPFFrom = flat, known.SPF.Records[0]
		}
	}
	q := dbsqlc.New()
	if len(dnsfix.Compute(row.Name, known, in)) == 0 {
		if err := q.DNSRecommendationClear(ctx, db, row.ID); err != nil {
			return fmt.Errorf("clearing recommendations of %s: %w", row.Name, err)
		}
		return nil
	}
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		locked, err := q.DomainGetByIDForUpdate(ctx, tx, row.ID)
		if dbutil.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("locking domain %s: %w", row.Name, err)
		}
		known, err := decodeKnown(locked)
		if err != nil || known == nil {
			return err
		}
		if _, err := dnsfix.Recompute(ctx, tx, locked, known, in, now); err != nil {
			return fmt.Errorf("storing recommendations of %s: %w", row.Name, err)
		}
		return nil
	})
}

// ReportInputs is FixDeps.Inputs over the DMARC reports: the domain's
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
		for _, n := range ri.Nonexistent {
			in.NonexistentSubdomains = append(in.NonexistentSubdomains, dnsfix.NonexistentName{Name: n.Name, Messages: n.Messages, Passing: n.Passing})
		}
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

// ApplyFix writes recommendation id through its domain's DNS connection
// (outside any transaction), then records the outcome (applied or failed,
// with its event) and, once applied, queues a fresh check of the domain,
// in one transaction in which inTx, when not nil, runs too (the job
// completes itself there). lastAttempt says a network failure is final:
// it is then recorded as the outcome instead of returned. A
// recommendation no longer applying (an operator re-ran a finished job) is
// left alone.
func ApplyFix(ctx context.Context, db dbutil.Executor, env *dnsfix.Env, em *events.Emitter, client *river.Client[pgx.Tx], id uuid.UUID, lastAttempt bool, now func() time.Time, inTx func(ctx context.Context, tx pgx.Tx) error) error {
	out, err := dnsfix.Write(ctx, db, env, id)
	writeErr := error(nil)
	switch {
	case err != nil && !lastAttempt:
		return err
	case err != nil:
		rec, gerr := dbsqlc.New().DNSRecommendationGetByID(ctx, db, id)
		if gerr != nil {
			return err
		}
		out, writeErr = &dnsfix.ApplyOutcome{Rec: rec}, fmt.Errorf("the DNS provider could not be reached: %w", err)
	case out.Skipped:
		return nil
	default:
		writeErr = out.Err
	}
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		recorded, err := dnsfix.Finish(ctx, tx, em, out, writeErr, now())
		if err != nil {
			return err
		}
		if recorded && writeErr == nil {
			if _, err := client.InsertTx(ctx, tx, CheckArgs{DomainID: out.Rec.DomainID}, nil); err != nil {
				return fmt.Errorf("error queueing the re-check: %w", err)
			}
		}
		if inTx != nil {
			return inTx(ctx, tx)
		}
		return nil
	})
}
