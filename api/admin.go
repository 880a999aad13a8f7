package api

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/identity"
	"github.com/mailwatch/mailwatch/internal/partitions"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// AdminAccount is an account as an admin sees it.
type AdminAccount struct {
	ID              uuid.UUID  `json:"id" validate:"required"`
	Email           string     `json:"email" validate:"required"`
	IsAdmin         bool       `json:"is_admin" validate:"required"`
	CreatedAt       time.Time  `json:"created_at" validate:"required"`
	UpdatedAt       time.Time  `json:"updated_at" validate:"required"`
	SuspendedAt     *time.Time `json:"suspended_at" validate:"required" description:"Set while suspended; null otherwise."`
	SuspendedReason *string    `json:"suspended_reason" validate:"required"`
	DeletedAt       *time.Time `json:"deleted_at" validate:"required" description:"Set once the account asked to be deleted; the row goes when its data is gone."`
}

func adminAccountFromRow(a dbsqlc.Account) AdminAccount {
	out := AdminAccount{ID: a.ID, Email: a.Email, IsAdmin: a.IsAdmin, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(),
		SuspendedReason: a.SuspendedReason}
	if a.SuspendedAt != nil {
		t := a.SuspendedAt.UTC()
		out.SuspendedAt = &t
	}
	if a.DeletedAt != nil {
		t := a.DeletedAt.UTC()
		out.DeletedAt = &t
	}
	return out
}

// SearchAccountsRequest is GET /api/admin/accounts.
type SearchAccountsRequest struct {
	Q      string `query:"q" validate:"max=254" description:"An account id (exact), or a substring of the email (case-insensitive). Empty lists every account."`
	Limit  *int   `query:"limit" validate:"omitempty,min=1,max=200" default:"50" description:"Page size, 1 to 200 (default 50)."`
	Cursor string `query:"cursor" description:"X-Next-Cursor of the previous page."`
}

// AdminAccountPage is one page of accounts in id (creation) order.
type AdminAccountPage = Page[AdminAccount]

// AdminAccountPath names one account.
type AdminAccountPath struct {
	AccountID uuid.UUID `path:"account_id" format:"uuid"`
}

// SuspendAccountRequest is POST /api/admin/accounts/{account_id}/suspend.
type SuspendAccountRequest struct {
	AccountID uuid.UUID `path:"account_id" format:"uuid"`
	Reason    string    `json:"reason" validate:"required,max=500,not_blank" description:"Shown to the account in every 403 while suspended, and kept in the audit event."`
}

// MaintenanceRequest is POST /api/admin/maintenance/{task}.
type MaintenanceRequest struct {
	Task string `path:"task" validate:"oneof=prune-events maintain-partitions recheck-domains reconcile-deliveries vacuum-queues rotate-signing-keys reparse-reports rebuild-event-rollups rebuild-message-rollups"`
}

// MaintenanceRun is the answer to a maintenance task: the River job that
// runs it.
type MaintenanceRun struct {
	Task          string  `json:"task" validate:"required"`
	JobIDs        []int64 `json:"job_ids" validate:"required" description:"The River jobs running the task (River UI and mailwatch jobs show them)."`
	Kind          string  `json:"kind" validate:"required" description:"The River job kind."`
	Queue         string  `json:"queue" validate:"required"`
	AlreadyQueued bool    `json:"already_queued" validate:"required" description:"True when the task was already queued or running: its job is returned and no second one is made."`
}

// QueueStats is GET /api/admin/queues.
type QueueStats struct {
	Queues []QueueStat `json:"queues" validate:"required"`
}

// QueueStat is one River queue's jobs by state.
type QueueStat struct {
	Name   string           `json:"name" validate:"required"`
	States map[string]int64 `json:"states" validate:"required" description:"Jobs per state (available, scheduled, running, retryable, completed, cancelled, discarded, pending); absent states are 0."`
	// OldestAvailableAgeSeconds is how long the oldest available job has
	// been due: a growing value means the queue's workers fall behind.
	OldestAvailableAgeSeconds *float64 `json:"oldest_available_age_seconds" validate:"required" description:"How long the oldest available job has waited since it was due; null when none is available. Growing: the workers fall behind."`
}

// maintenanceTasks maps a task name to its job.
var maintenanceTasks = map[string]func() river.JobArgs{
	"prune-events":            func() river.JobArgs { return events.PruneArgs{} },
	"maintain-partitions":     func() river.JobArgs { return partitions.MaintainArgs{} },
	"recheck-domains":         func() river.JobArgs { return domains.RecheckAllArgs{} },
	"reconcile-deliveries":    func() river.JobArgs { return deliveries.ReconcileArgs{} },
	"vacuum-queues":           func() river.JobArgs { return queues.VacuumArgs{} },
	"rotate-signing-keys":     func() river.JobArgs { return identity.SigningKeyRotateArgs{Force: true} },
	"reparse-reports":         func() river.JobArgs { return reports.ReparseArgs{} },
	"rebuild-event-rollups":   func() river.JobArgs { return events.RollupRebuildAllArgs{} },
	"rebuild-message-rollups": func() river.JobArgs { return providers.RollupRebuildArgs{} },
}

func (s *Server) adminRoutes() {
	Handle(s.router, Endpoint[SearchAccountsRequest, AdminAccountPage]{
		Method: "GET", Path: "/api/admin/accounts", OperationID: "adminSearchAccounts", Tag: "admin", Auth: AuthAdmin,
		Summary: "Search accounts",
		Description: "`q` is an account id (exact match) or a substring of the email (case-insensitive); empty lists " +
			"every account. Oldest first, paginated with X-Next-Cursor (at most 200 per page). Reads are not audited.",
		Call: s.searchAccounts,
	})
	Handle(s.router, Endpoint[SuspendAccountRequest, AdminAccount]{
		Method: "POST", Path: "/api/admin/accounts/{account_id}/suspend", OperationID: "adminSuspendAccount", Tag: "admin", Auth: AuthAdmin,
		Summary: "Suspend an account",
		Description: "From now on (on every replica within 5 s) every key of the account answers 403 with the reason in " +
			"`detail`, its data-API tokens are refused and its webhook pushes wait (not failed, no attempt used) until it " +
			"is unsuspended. Emits account_suspended on the account. Already suspended, being deleted, or your own " +
			"account: 409.",
		Errors: []int{409},
		Call:   s.suspendAccount,
	})
	Handle(s.router, Endpoint[AdminAccountPath, AdminAccount]{
		Method: "POST", Path: "/api/admin/accounts/{account_id}/unsuspend", OperationID: "adminUnsuspendAccount", Tag: "admin", Auth: AuthAdmin,
		Summary: "Lift an account's suspension",
		Description: "Its keys work again and its waiting webhook pushes are made due at once. Emits " +
			"account_unsuspended on the account. Not suspended: 409.",
		Errors: []int{409},
		Call:   s.unsuspendAccount,
	})
	Handle(s.router, Endpoint[MaintenanceRequest, MaintenanceRun]{
		Method: "POST", Path: "/api/admin/maintenance/{task}", Status: 202, OperationID: "adminRunMaintenance", Tag: "admin", Auth: AuthAdmin,
		Summary: "Run a maintenance task now",
		Description: "Queues the task's River job and answers its id. prune-events: delete, row by row, the events and message " +
			"events past a plan's shorter retention and those no partition holds (event_prune). maintain-partitions: create " +
			"the time partitions ahead and drop those past their retention (partition_maintain; it also runs hourly). " +
			"recheck-domains: a DNS check of every domain now (domain_recheck_all, one domain_check per " +
			"domain). reconcile-deliveries: repair delivery rows whose job changed outside mailwatch (webhook_reconcile). " +
			"vacuum-queues: delete finished River jobs older than an hour (queue_vacuum; rows only, autovacuum reclaims " +
			"the space). rotate-signing-keys: rotate the data-API signing keys now (signing_key_rotate with force). " +
			"reparse-reports: parse again every failed report whose raw bytes are kept, e.g. after an upgrade (report_reparse, " +
			"one report_parse job each). rebuild-event-rollups: recompute every account's hourly event counters from the " +
			"raw events (event_rollup_rebuild_all, one event_rollup_rebuild per account; each holds back only that " +
			"account's new events, for a few seconds per million events). rebuild-message-rollups: recount every account's message-event rollups from " +
			"the raw events (message_rollup_rebuild). " +
			"A task already queued or running is not queued twice: its job is answered with already_queued. Emits " +
			"maintenance_task_run on the calling admin's own account.",
		Call: s.runMaintenance,
	})
	Handle(s.router, Endpoint[emptyRequest, QueueStats]{
		Method: "GET", Path: "/api/admin/queues", OperationID: "adminQueueStats", Tag: "admin", Auth: AuthAdmin,
		Summary:     "River queue and job statistics",
		Description: "Jobs per queue and state, and the age of each queue's oldest available job.",
		Call:        s.queueStats,
	})
}

// likeEscape makes s match literally inside a LIKE pattern.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func (s *Server) searchAccounts(ctx context.Context, req *SearchAccountsRequest) (*AdminAccountPage, error) {
	limit := 50
	if req.Limit != nil {
		limit = *req.Limit
	}
	q := url.Values{}
	q.Set("limit", strconv.Itoa(limit))
	p := dbsqlc.AccountSearchParams{MaxRows: int32(limit + 1)}
	if term := strings.ToLower(strings.TrimSpace(req.Q)); term != "" {
		q.Set("q", req.Q)
		if id, err := uuid.Parse(term); err == nil {
			p.ID = &id
		} else {
			like := "%" + likeEscape(term) + "%"
			p.EmailLike = &like
		}
	}
	if req.Cursor != "" {
		id, err := uuid.Parse(req.Cursor)
		if err != nil {
			return nil, InvalidField("cursor", "is malformed; pass X-Next-Cursor of the previous page as is")
		}
		p.After = id
	}
	rows, err := s.q.AccountSearch(ctx, s.db, p)
	if err != nil {
		return nil, err
	}
	page := &AdminAccountPage{path: "/api/admin/accounts", query: q}
	if len(rows) > limit {
		rows = rows[:limit]
		page.next = rows[len(rows)-1].ID.String()
	}
	for _, r := range rows {
		page.Items = append(page.Items, adminAccountFromRow(r))
	}
	return page, nil
}

func (s *Server) suspendAccount(ctx context.Context, req *SuspendAccountRequest) (*AdminAccount, error) {
	caller := mustCaller(ctx)
	ch, err := s.accountService().Suspend(ctx, s.db, accounts.Admin{AccountID: caller.AccountID, KeyIdentifier: caller.KeyIdentifier},
		req.AccountID, req.Reason)
	return s.accountChanged(req.AccountID, ch, err)
}

func (s *Server) unsuspendAccount(ctx context.Context, req *AdminAccountPath) (*AdminAccount, error) {
	caller := mustCaller(ctx)
	ch, err := s.accountService().Unsuspend(ctx, s.db, accounts.Admin{AccountID: caller.AccountID, KeyIdentifier: caller.KeyIdentifier},
		req.AccountID)
	return s.accountChanged(req.AccountID, ch, err)
}

// accountChanged answers an admin's change of an account, after making
// this replica forget what it cached of the account and its keys; other
// replicas follow within their cache TTLs.
func (s *Server) accountChanged(id uuid.UUID, ch *accounts.Changed, err error) (*AdminAccount, error) {
	if err != nil {
		return nil, accountError(err)
	}
	s.forgetAccount(id, ch.KeyHashes)
	out := adminAccountFromRow(ch.Account)
	return &out, nil
}

func (s *Server) runMaintenance(ctx context.Context, req *MaintenanceRequest) (*MaintenanceRun, error) {
	caller := mustCaller(ctx)
	mk, ok := maintenanceTasks[req.Task]
	if !ok {
		return nil, InvalidField("task", "is not a maintenance task")
	}
	args := mk()
	return dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (*MaintenanceRun, error) {
		res, err := s.deps.River.InsertTx(ctx, tx, args, queues.RunNowOpts())
		if err != nil {
			return nil, err
		}
		run := &MaintenanceRun{Task: req.Task, JobIDs: []int64{res.Job.ID}, Kind: res.Job.Kind, Queue: res.Job.Queue,
			AlreadyQueued: res.UniqueSkippedAsDuplicate}
		_, err = s.deps.Emitter.Emit(ctx, tx, events.Event{AccountID: caller.AccountID, Type: events.TypeMaintenanceTaskRun,
			Payload: map[string]any{"task": req.Task, "job_id": res.Job.ID, "job_kind": res.Job.Kind,
				"already_queued": res.UniqueSkippedAsDuplicate, "admin_key_identifier": caller.KeyIdentifier}})
		if err != nil {
			return nil, err
		}
		return run, nil
	})
}

func (s *Server) queueStats(ctx context.Context, _ *emptyRequest) (*QueueStats, error) {
	stats, err := queues.Stats(ctx, s.db)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := &QueueStats{Queues: []QueueStat{}}
	index := map[string]int{}
	for _, st := range stats {
		i, ok := index[st.Queue]
		if !ok {
			i = len(out.Queues)
			index[st.Queue] = i
			out.Queues = append(out.Queues, QueueStat{Name: st.Queue, States: map[string]int64{
				"available": 0, "scheduled": 0, "running": 0, "retryable": 0, "completed": 0, "cancelled": 0, "discarded": 0, "pending": 0,
			}})
		}
		q := &out.Queues[i]
		q.States[st.State] = st.Count
		if st.OldestAvailableAt != nil {
			age := max(now.Sub(*st.OldestAvailableAt).Seconds(), 0)
			q.OldestAvailableAgeSeconds = &age
		}
	}
	return out, nil
}
