package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/jobs"
)

const jobsUsage = `usage:
  mailwatch jobs list [--state=a,b] [--kind=a,b] [--queue=a,b] [--limit=N]
  mailwatch jobs retry <job id>
  mailwatch jobs cancel <job id>
  mailwatch jobs rebuild-message-rollups [--account=<account id>]`

// runJobs is the operator's view of River, over River's client API (the
// same calls River UI makes). Rows that follow jobs, such as webhook
// deliveries, converge the same way as after River UI: the worker when the
// job runs; rows of a cancelled or retried job are reconciled at once.
func runJobs(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"jobs: give a subcommand\n" + jobsUsage}
	}
	switch args[0] {
	case "list", "retry", "cancel":
	case "rebuild-message-rollups":
		return runRebuildMessageRollups(ctx, cfg, logger, args[1:], stdout)
	default:
		return usageError{fmt.Sprintf("jobs: unknown subcommand %q\n%s", args[0], jobsUsage)}
	}
	var (
		params *river.JobListParams
		id     int64
		err    error
	)
	if args[0] == "list" {
		if params, err = parseJobList(args[1:]); err != nil {
			return err
		}
	} else {
		if len(args) != 2 {
			return usageError{fmt.Sprintf("jobs %s: give exactly one job id\n%s", args[0], jobsUsage)}
		}
		if id, err = strconv.ParseInt(args[1], 10, 64); err != nil || id <= 0 {
			return usageError{fmt.Sprintf("jobs %s: %q is not a job id", args[0], args[1])}
		}
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: logger, Settings: jobs.SettingsFrom(cfg)}, jobs.Options{})
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		res, err := client.JobList(ctx, params)
		if err != nil {
			return fmt.Errorf("error listing jobs: %w", err)
		}
		printJobs(stdout, res.Jobs)
		return nil
	case "retry":
		job, err := client.JobRetry(ctx, id)
		if err != nil {
			return jobError("retrying", id, err)
		}
		fmt.Fprintf(stdout, "job %d (%s) is %s, scheduled at %s (attempt %d of %d so far)\n",
			job.ID, job.Kind, job.State, job.ScheduledAt.UTC().Format(time.RFC3339), job.Attempt, job.MaxAttempts)
		return reconcileJob(ctx, pool, client, id) // ui.go
	default:
		job, err := client.JobCancel(ctx, id)
		if err != nil {
			return jobError("cancelling", id, err)
		}
		note := ""
		if job.State == rivertype.JobStateRunning {
			note = " (running: its worker is told to stop; it is cancelled when it returns)"
		}
		fmt.Fprintf(stdout, "job %d (%s) is %s%s\n", job.ID, job.Kind, job.State, note)
		return reconcileJob(ctx, pool, client, id) // ui.go
	}
}

func jobError(doing string, id int64, err error) error {
	if errors.Is(err, river.ErrNotFound) {
		return fmt.Errorf("job %d does not exist", id)
	}
	return fmt.Errorf("error %s job %d: %w", doing, id, err)
}

func parseJobList(args []string) (*river.JobListParams, error) {
	params := river.NewJobListParams().OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(50)
	for _, a := range args {
		name, value, ok := strings.Cut(a, "=")
		if !ok || value == "" {
			return nil, usageError{fmt.Sprintf("jobs list: flag %q needs a value (--name=value)\n%s", a, jobsUsage)}
		}
		list := splitList(value)
		switch name {
		case "--state":
			states := make([]rivertype.JobState, 0, len(list))
			for _, s := range list {
				st := rivertype.JobState(s)
				if !slices.Contains(rivertype.JobStates(), st) {
					return nil, usageError{fmt.Sprintf("jobs list: unknown state %q (one of %v)", s, rivertype.JobStates())}
				}
				states = append(states, st)
			}
			params = params.States(states...)
		case "--kind":
			for _, k := range list {
				if !slices.Contains(jobs.Kinds(), k) {
					return nil, usageError{fmt.Sprintf("jobs list: unknown kind %q (one of %s)", k, strings.Join(jobs.Kinds(), ", "))}
				}
			}
			params = params.Kinds(list...)
		case "--queue":
			params = params.Queues(list...)
		case "--limit":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 || n > 10_000 {
				return nil, usageError{"jobs list: --limit must be 1 to 10000"}
			}
			params = params.First(n)
		default:
			return nil, usageError{fmt.Sprintf("jobs list: unknown flag %q\n%s", name, jobsUsage)}
		}
	}
	return params, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func printJobs(w io.Writer, list []*rivertype.JobRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tKIND\tQUEUE\tATTEMPT\tSCHEDULED_AT\tARGS")
	for _, j := range list {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.State, j.Kind, j.Queue, j.Attempt, j.MaxAttempts,
			j.ScheduledAt.UTC().Format(time.RFC3339), j.EncodedArgs)
	}
	_ = tw.Flush()
}

// runRebuildMessageRollups queues the maintenance job that recounts the
// message-event rollups from the raw events (providers.RollupRebuildArgs):
// one account's with --account, every account's without. The worker fleet
// runs it; the same run is not queued twice while one is waiting or running.
func runRebuildMessageRollups(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	var job providers.RollupRebuildArgs
	for _, a := range args {
		name, value, _ := strings.Cut(a, "=")
		if name != "--account" {
			return usageError{fmt.Sprintf("jobs rebuild-message-rollups: unknown argument %q\n%s", a, jobsUsage)}
		}
		id, err := uuid.Parse(value)
		if err != nil || id == uuid.Nil {
			return usageError{fmt.Sprintf("jobs rebuild-message-rollups: %q is not an account id", value)}
		}
		job.AccountID = id
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: logger, Settings: jobs.SettingsFrom(cfg)}, jobs.Options{})
	if err != nil {
		return err
	}
	opts := queues.RunNowOpts()
	opts.UniqueOpts.ByArgs = true
	res, err := client.Insert(ctx, job, opts)
	if err != nil {
		return fmt.Errorf("error queueing the rebuild: %w", err)
	}
	note := ""
	if res.UniqueSkippedAsDuplicate {
		note = " (already queued)"
	}
	fmt.Fprintf(stdout, "job %d (%s) is %s%s; 'mailwatch jobs list --kind=%s' follows it, the worker logs what it corrected\n",
		res.Job.ID, res.Job.Kind, res.Job.State, note, res.Job.Kind)
	return nil
}
