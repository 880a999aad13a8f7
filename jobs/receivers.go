package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/fairwait"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/receivers"
)

// addReceiverWorkers registers this feature's workers.
func addReceiverWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &ReceiverExpireWorker{deps: deps})
	gate := fairwait.NewGate[uuid.UUID](deps.analysisAccountConcurrency, "analysis jobs", "half of WORKER_CONCURRENCY")
	gate.Observe(deps.observeAnalysisGate)
	river.AddWorker(w, &ReceiverAnalyzeWorker{deps: deps, gate: gate})
}

// receiverPeriodicJobs returns this feature's schedules.
func receiverPeriodicJobs(deps Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Minute), func() (river.JobArgs, *river.InsertOpts) {
			return ReceiverExpireArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "receiver_expire"}),
	}
}

// ReceiverExpireArgs expires receivers: it releases the SMS numbers of
// expired receivers, marks them expired and purges those past the grace
// period with their messages. It carries no ids: every run converges on
// the current rows.
type ReceiverExpireArgs struct{}

// Kind implements river.JobArgs.
func (ReceiverExpireArgs) Kind() string { return "receiver_expire" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ReceiverExpireArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Minute}}
}

// ReceiverExpireWorker works ReceiverExpireArgs.
type ReceiverExpireWorker struct {
	river.WorkerDefaults[ReceiverExpireArgs]
	deps Deps
}

// Timeout bounds one run; a big backlog continues in the next run.
func (w *ReceiverExpireWorker) Timeout(*river.Job[ReceiverExpireArgs]) time.Duration {
	return 5 * time.Minute
}

// Work releases, marks and purges.
func (w *ReceiverExpireWorker) Work(ctx context.Context, job *river.Job[ReceiverExpireArgs]) error {
	now := w.deps.Now().UTC()
	res, err := receivers.Expire(ctx, w.deps.Pool, now)
	if err != nil {
		return err
	}
	if res.Released+res.Marked+res.Purged+res.PrunedDays > 0 {
		w.deps.Logger.InfoContext(ctx, "expired receivers",
			slog.Int64("numbers_released", res.Released), slog.Int64("marked", res.Marked), slog.Int64("purged", res.Purged), slog.Int64("daily_counts_pruned", res.PrunedDays))
	}
	return nil
}

// ReceiverAnalyzeWorker works receivers.AnalyzeArgs: the deliverability
// analysis of a message received over SMTP.
type ReceiverAnalyzeWorker struct {
	river.WorkerDefaults[receivers.AnalyzeArgs]
	deps Deps
	// gate bounds the analyses of one account running in this process, so
	// one account's flood of test mail (each analysis tens of DNS queries
	// and a spam check) takes at most half the analysis queue's workers and
	// the other accounts' analyses run beside it.
	gate *fairwait.Gate[uuid.UUID]
}

// Analysis jobs over their account's bound wait like provider payload
// jobs: put back at once, looked at again after a short, growing,
// jittered delay.
const (
	analysisFairWaitBase   = 250 * time.Millisecond
	analysisFairWaitMax    = 5 * time.Second
	analysisFairWaitSpread = 0.25
	// MetadataAnalysisFairWaits counts a job's waits in its metadata.
	MetadataAnalysisFairWaits = "analysis_fair_waits"
)

// Timeout bounds one analysis (its DNS lookups are bounded inside it).
func (w *ReceiverAnalyzeWorker) Timeout(*river.Job[receivers.AnalyzeArgs]) time.Duration {
	return receivers.AnalysisTimeout + 30*time.Second
}

// Work analyses the message and stores the report. A job over its
// account's bound (gate) does no work: it is snoozed, using no attempt. A
// message deleted since (its receiver purged) completes the job.
func (w *ReceiverAnalyzeWorker) Work(ctx context.Context, job *river.Job[receivers.AnalyzeArgs]) error {
	if w.deps.Resolver == nil {
		return errors.New("no DNS resolver configured for the message analysis")
	}
	if account := job.Args.AccountID; account != uuid.Nil && w.gate != nil {
		release, busy := w.gate.Admit(account)
		if busy != nil {
			waits := fairwait.Waits(job.Metadata, MetadataAnalysisFairWaits)
			if err := river.MetadataSet(ctx, MetadataAnalysisFairWaits, waits+1); err != nil {
				return fmt.Errorf("error counting a wait: %w", err)
			}
			return river.JobSnooze(fairwait.Delay(waits, analysisFairWaitBase, analysisFairWaitMax, analysisFairWaitSpread, nil))
		}
		defer release()
	}
	now := w.deps.Now()
	opts := deliverability.Options{Spam: w.deps.Spam, Reputation: w.blocklists(now)}
	_, err := receivers.AnalyzeMessage(ctx, w.deps.Pool, &events.Emitter{}, w.deps.Resolver, opts, job.Args.MessageID, now)
	if dbutil.IsNotFound(err) {
		return nil
	}
	return err
}

// blocklists hands the analysis the workers' blocklist checker (its lists,
// pace and the answer cache shared with the domains' checks); nil, and so
// a skipped section, without one.
func (w *ReceiverAnalyzeWorker) blocklists(now time.Time) deliverability.ReputationFunc {
	c := w.deps.Reputation
	if c == nil {
		return nil
	}
	return func(ctx context.Context, ip netip.Addr) (deliverability.ReputationResult, error) {
		res, err := c.LookupAddr(ctx, w.deps.Pool, ip, now)
		if err != nil {
			return deliverability.ReputationResult{}, err
		}
		out := deliverability.ReputationResult{Checked: res.Checked, Unchecked: res.Unchecked}
		for _, l := range res.Listings {
			out.Listings = append(out.Listings, deliverability.Listing{List: l.Zone, Detail: l.Detail(), Informational: l.Informational})
		}
		return out, nil
	}
}
