package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
)

type adminAccountJSON struct {
	ID              string     `json:"id"`
	Email           string     `json:"email"`
	SuspendedAt     *time.Time `json:"suspended_at"`
	SuspendedReason *string    `json:"suspended_reason"`
	DeletedAt       *time.Time `json:"deleted_at"`
}

type auditEvent struct {
	EventType string         `json:"event_type"`
	Payload   map[string]any `json:"payload"`
}

// eventsOf lists an account's events of one type through its own key.
func (b *testBundle) eventsOf(t *testing.T, key, eventType string) []auditEvent {
	t.Helper()
	resp := b.do(t, "GET", "/api/accounts/me/events?event_type="+eventType, key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var out []auditEvent
	resp.JSON(t, &out)
	return out
}

// TestSuspendBlocksKeysTokensAndPushes: a suspended account's keys answer
// 403 with the reason on every route, its data-API tokens are refused and
// its webhook pushes wait; after unsuspension the keys work and the
// waiting push arrives. Both changes are audited on the account.
func TestSuspendBlocksKeysTokensAndPushes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWebhooks(t)
	b.start(t)
	admin := b.createAccount(t)
	b.makeAdmin(t, admin)
	target := b.createAccount(t)
	bystander := b.createAccount(t)
	rc := newHookReceiver(t, nil)
	createSub(t, b.testBundle, target.Key, map[string]any{"url": rc.URL, "event_types": []string{"receiver_message_received"}})
	tokenBefore := b.token(t, target.Key)
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/rest/v1/events?limit=1", tokenBefore, nil).Status)

	suspendPath := "/api/admin/accounts/" + target.ID + "/suspend"
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", suspendPath, target.Key, map[string]any{"reason": "x"}).Status, "admins only")
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", suspendPath, admin.Key, map[string]any{}).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/api/admin/accounts/"+uuid.NewString()+"/suspend", admin.Key,
		map[string]any{"reason": "x"}).Status)
	require.Equal(t, http.StatusConflict, b.do(t, "POST", "/api/admin/accounts/"+admin.ID+"/suspend", admin.Key,
		map[string]any{"reason": "x"}).Status, "not yourself")

	resp := b.do(t, "POST", suspendPath, admin.Key, map[string]any{"reason": "unpaid invoices since March"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var acct adminAccountJSON
	resp.JSON(t, &acct)
	require.NotNil(t, acct.SuspendedAt)
	require.Equal(t, "unpaid invoices since March", *acct.SuspendedReason)
	require.Equal(t, http.StatusConflict, b.do(t, "POST", suspendPath, admin.Key, map[string]any{"reason": "again"}).Status)

	for _, r := range []struct{ method, path string }{
		{"GET", "/api/accounts/me"}, {"GET", "/api/accounts/me/events"}, {"POST", "/api/accounts/me/receivers"},
		{"GET", "/api/accounts/me/deliveries"}, {"DELETE", "/api/accounts/me"},
	} {
		resp := b.do(t, r.method, r.path, target.Key, nil)
		require.Equal(t, http.StatusForbidden, resp.Status, "%s %s: %s", r.method, r.path, resp.Body)
		require.Contains(t, resp.Detail(t), "suspended: unpaid invoices since March")
	}
	require.Equal(t, http.StatusForbidden, b.do(t, "POST", "/api/auth/token", target.Key, nil).Status, "no new tokens")
	require.Equal(t, http.StatusForbidden, b.do(t, "POST", "/api/auth/token", "",
		map[string]string{"email": target.Email, "password": "correct horse battery"}).Status, "not by password either")
	require.Equal(t, http.StatusForbidden, b.do(t, "GET", "/rest/v1/events?limit=1", tokenBefore, nil).Status, "old tokens refused")
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", bystander.Key, nil).Status, "others unaffected")

	// An event while suspended: its push waits (the job snoozes), nothing
	// reaches the subscriber, no attempt is used.
	eventID := b.emitMessage(t, target.ID)
	var jobID int64
	require.Eventually(t, func() bool {
		var state string
		var at time.Time
		err := b.db.QueryRow(ctx, `SELECT j.id, j.state::text, j.scheduled_at FROM river_job j JOIN webhook_deliveries d ON d.job_id = j.id
			WHERE d.event_id = $1`, eventID).Scan(&jobID, &state, &at)
		return err == nil && state == "scheduled" && time.Until(at) > time.Minute
	}, 20*time.Second, 20*time.Millisecond)
	require.Zero(t, rc.count())
	var status string
	var attempts int
	require.NoError(t, b.db.QueryRow(ctx, "SELECT status, attempts FROM webhook_deliveries WHERE event_id = $1", eventID).Scan(&status, &attempts))
	require.Equal(t, "pending", status)
	require.Zero(t, attempts)
	// The periodic reconciler copies the snoozed job's time into the row;
	// unsuspending must not wait for it.
	_, err := deliveries.Reconcile(ctx, b.db, &events.Emitter{River: b.worker}, time.Now().Add(time.Minute))
	require.NoError(t, err)
	var nextRetry *time.Time
	require.NoError(t, b.db.QueryRow(ctx, "SELECT next_retry_at FROM webhook_deliveries WHERE event_id = $1", eventID).Scan(&nextRetry))
	require.NotNil(t, nextRetry)
	require.Greater(t, time.Until(*nextRetry), time.Minute)

	resp = b.do(t, "POST", "/api/admin/accounts/"+target.ID+"/unsuspend", admin.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &acct)
	require.Nil(t, acct.SuspendedAt)
	require.Equal(t, http.StatusConflict, b.do(t, "POST", "/api/admin/accounts/"+target.ID+"/unsuspend", admin.Key, nil).Status)
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", target.Key, nil).Status)
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/rest/v1/events?limit=1", tokenBefore, nil).Status)

	// The waiting push goes out now, not two minutes later.
	require.Eventually(t, func() bool { return rc.count() == 1 }, 10*time.Second, 20*time.Millisecond)
	d := b.deliveryOf(t, target.Key, eventID)
	d = b.waitDelivery(t, target.Key, d.ID, is("delivered", 1))
	require.Equal(t, 10, d.MaxAttempts)

	suspended := b.eventsOf(t, target.Key, "account_suspended")
	require.Len(t, suspended, 1)
	require.Equal(t, "unpaid invoices since March", suspended[0].Payload["reason"])
	require.Equal(t, admin.ID, suspended[0].Payload["admin_account_id"])
	require.Equal(t, admin.Email, suspended[0].Payload["admin_email"])
	unsuspended := b.eventsOf(t, target.Key, "account_unsuspended")
	require.Len(t, unsuspended, 1)
	require.Equal(t, "unpaid invoices since March", unsuspended[0].Payload["previous_reason"])
}

type maintenanceJSON struct {
	Task          string  `json:"task"`
	JobIDs        []int64 `json:"job_ids"`
	Kind          string  `json:"kind"`
	Queue         string  `json:"queue"`
	AlreadyQueued bool    `json:"already_queued"`
}

// TestMaintenanceTasks: each task queues its River job and answers its
// real id; asking again while it is queued returns the same job; each run
// is audited on the admin's own account; the queue statistics show them.
func TestMaintenanceTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	admin := b.createAccount(t)
	b.makeAdmin(t, admin)
	user := b.createAccount(t)

	require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/api/admin/maintenance/prune-events", user.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/api/admin/queues", user.Key, nil).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", "/api/admin/maintenance/defrag", admin.Key, nil).Status)

	kinds := map[string]string{
		"prune-events": "event_prune", "maintain-partitions": "partition_maintain", "recheck-domains": "domain_recheck_all", "reconcile-deliveries": "webhook_reconcile",
		"vacuum-queues": "queue_vacuum", "rotate-signing-keys": "signing_key_rotate", "reparse-reports": "report_reparse",
		"rebuild-event-rollups":   "event_rollup_rebuild_all",
		"rebuild-message-rollups": "message_rollup_rebuild",
	}
	for task, kind := range kinds {
		resp := b.do(t, "POST", "/api/admin/maintenance/"+task, admin.Key, nil)
		require.Equal(t, http.StatusAccepted, resp.Status, "%s: %s", task, resp.Body)
		var run maintenanceJSON
		resp.JSON(t, &run)
		require.Equal(t, task, run.Task)
		require.Equal(t, kind, run.Kind)
		require.Equal(t, "maintenance", run.Queue)
		require.False(t, run.AlreadyQueued)
		require.Len(t, run.JobIDs, 1)
		var gotKind, state string
		require.NoError(t, b.db.QueryRow(ctx, "SELECT kind, state::text FROM river_job WHERE id = $1", run.JobIDs[0]).Scan(&gotKind, &state))
		require.Equal(t, kind, gotKind)
		require.Equal(t, "available", state)

		resp = b.do(t, "POST", "/api/admin/maintenance/"+task, admin.Key, nil)
		require.Equal(t, http.StatusAccepted, resp.Status)
		var again maintenanceJSON
		resp.JSON(t, &again)
		require.True(t, again.AlreadyQueued, task)
		require.Equal(t, run.JobIDs, again.JobIDs)
	}
	var force bool
	require.NoError(t, b.db.QueryRow(ctx, "SELECT (args->>'force')::boolean FROM river_job WHERE kind = 'signing_key_rotate'").Scan(&force))
	require.True(t, force, "rotate-signing-keys rotates whatever the key's age")

	audit := b.eventsOf(t, admin.Key, "maintenance_task_run")
	require.Len(t, audit, 2*len(kinds), "every run is audited on the admin's account")
	for _, e := range audit {
		require.Contains(t, kinds, e.Payload["task"])
		require.NotZero(t, e.Payload["job_id"])
		require.Equal(t, admin.Key[:7], e.Payload["admin_key_identifier"])
	}

	resp := b.do(t, "GET", "/api/admin/queues", admin.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var stats struct {
		Queues []struct {
			Name                      string           `json:"name"`
			States                    map[string]int64 `json:"states"`
			OldestAvailableAgeSeconds *float64         `json:"oldest_available_age_seconds"`
		} `json:"queues"`
	}
	resp.JSON(t, &stats)
	found := false
	for _, q := range stats.Queues {
		if q.Name == "maintenance" {
			found = true
			require.GreaterOrEqual(t, q.States["available"], int64(len(kinds)))
			require.Contains(t, q.States, "completed")
			require.NotNil(t, q.OldestAvailableAgeSeconds)
		}
	}
	require.True(t, found, "%s", resp.Body)
}

// TestAdminSearchAccounts: by email substring (LIKE characters match
// literally) or id, paginated, admins only.
func TestAdminSearchAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.createAccount(t)
	b.makeAdmin(t, admin)
	var mine []account
	for range 3 {
		mine = append(mine, b.createAccount(t))
	}
	// uniqueEmail embeds the test name, so this substring finds ours only
	// (other tests' accounts are in their own transactions anyway).
	q := "adminsearchaccounts-"
	require.Contains(t, mine[0].Email, q)

	search := func(query string) ([]adminAccountJSON, string) {
		resp := b.do(t, "GET", "/api/admin/accounts?"+query, admin.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out []adminAccountJSON
		resp.JSON(t, &out)
		return out, resp.Header.Get("X-Next-Cursor")
	}
	got, next := search("q=" + url.QueryEscape(strings.ToUpper(q)) + "&limit=3")
	require.Len(t, got, 3, "the admin and the three accounts share the prefix")
	require.NotEmpty(t, next)
	rest, next2 := search("q=" + url.QueryEscape(q) + "&limit=3&cursor=" + next)
	require.Len(t, rest, 1)
	require.Empty(t, next2)
	seen := map[string]bool{}
	for _, a := range append(got, rest...) {
		seen[a.ID] = true
	}
	for _, a := range append(mine, admin) {
		require.True(t, seen[a.ID], a.Email)
	}

	got, _ = search("q=" + mine[1].ID)
	require.Len(t, got, 1)
	require.Equal(t, mine[1].Email, got[0].Email)
	got, _ = search("q=" + url.QueryEscape("%"))
	require.Empty(t, got, "% matches itself, not everything")
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", "/api/admin/accounts?limit=500", admin.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/api/admin/accounts", mine[0].Key, nil).Status)
}

// TestPasswordChangeRevokesTokens: tokens issued before a password change
// are refused by the data API, new ones work, API keys stay valid, and the
// change is a security event.
func TestPasswordChangeRevokesTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	old := b.token(t, a.Key)
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/rest/v1/events?limit=1", old, nil).Status)

	require.Equal(t, http.StatusOK, b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"email": uniqueEmail(t)}).Status)
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/rest/v1/events?limit=1", old, nil).Status, "an email change revokes nothing")

	require.Equal(t, http.StatusOK, b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"password": "a brand new password"}).Status)
	resp := b.do(t, "GET", "/rest/v1/events?limit=1", old, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "password changed")

	fresh := b.token(t, a.Key)
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/rest/v1/events?limit=1", fresh, nil).Status, "a token issued after the change works")
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", a.Key, nil).Status, "keys are not sessions")

	changed := b.eventsOf(t, a.Key, "password_changed")
	require.Len(t, changed, 1)
	require.Equal(t, a.Key[:7], changed[0].Payload["key_identifier"])

	// Deleting the account refuses its tokens at once too.
	require.Equal(t, http.StatusAccepted, b.do(t, "DELETE", "/api/accounts/me", a.Key, nil).Status)
	require.Equal(t, http.StatusUnauthorized, b.do(t, "GET", "/rest/v1/events?limit=1", fresh, nil).Status)
}
