package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/apikey"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
)

// uiReceiver is a loopback webhook endpoint whose answer is set per
// delivery (webhook-id): 204 unless told otherwise.
type uiReceiver struct {
	mu     sync.Mutex
	answer map[string]int // webhook-id -> status; 503 comes with Retry-After: 3600
	got    map[string]int // webhook-id -> requests received
}

func (r *uiReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	r.got[id]++
	status := r.answer[id]
	r.mu.Unlock()
	if status == 0 {
		status = http.StatusNoContent
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "3600")
	}
	w.WriteHeader(status)
}

func (r *uiReceiver) set(id uuid.UUID, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer[id.String()] = status
}

func (r *uiReceiver) count(id uuid.UUID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[id.String()]
}

// uiDelivery is what a test reads back of a delivery and its job.
type uiDelivery struct {
	status, errorClass string
	attempts           int32
	jobID              int64
	jobState           string
	output             map[string]any
}

// TestRiverUIOperatorActions is the acceptance test of `mailwatch ui`: the
// real binary serves River UI behind authentication, and River UI's own
// JSON API (what its frontend calls: POST /api/jobs/retry, /cancel,
// /delete) drives the delivery jobs a real `mailwatch worker` works against
// a loopback receiver. Each action either does what the operator meant or
// says why in the job's output.
func TestRiverUIOperatorActions(t *testing.T) {
	t.Parallel()
	rc := &uiReceiver{answer: map[string]int{}, got: map[string]int{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	f := newHookFixture(t, srv.URL)
	ctx := context.Background()
	uiAddr := freeAddr(t)
	uiEnv := append(baseEnv(f.url), "UI_ADDR="+uiAddr, "LOG_LEVEL=warn")

	t.Run("RefusesToStartWithoutAuthentication", func(t *testing.T) {
		cmd := exec.Command(buildBinary(t), "ui")
		cmd.Env = uiEnv
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "no admin account and no basic auth: nobody could log in")
		require.Contains(t, string(out), "UI_BASIC_AUTH_USER")
		require.Contains(t, string(out), "mailwatch admin grant")
		cmd = exec.Command(buildBinary(t), "ui")
		cmd.Env = append(uiEnv, "UI_BASIC_AUTH_USER=ops")
		out, err = cmd.CombinedOutput()
		require.Error(t, err)
		require.Contains(t, string(out), "UI_BASIC_AUTH_USER and UI_BASIC_AUTH_PASSWORD must be set together")
	})

	adminKey, userKey := apikey.Generate(), apikey.Generate()
	for i, k := range []apikey.Key{adminKey, userKey} {
		account := f.account
		if i == 0 {
			account = uuid.Must(uuid.NewV7())
			_, err := f.pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash, is_admin) VALUES ($1, 'ops@example.com', 'x', true)", account)
			require.NoError(t, err)
		}
		_, err := dbsqlc.New().APIKeyInsert(ctx, f.pool, dbsqlc.APIKeyInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: account, Label: "ui", KeyIdentifier: k.Identifier, KeyHash: k.Hash,
		})
		require.NoError(t, err)
	}
	ui := startProcess(t, append(uiEnv, "UI_BASIC_AUTH_USER=ops", "UI_BASIC_AUTH_PASSWORD=correct horse battery"), "ui")
	worker := startProcess(t, f.workerEnv(t), "worker", "--queues=webhooks")
	base := "http://" + uiAddr

	call := func(t *testing.T, method, path string, body any, auth func(*http.Request)) (int, []byte, http.Header) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			require.NoError(t, err)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, base+path, rd)
		require.NoError(t, err)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if auth != nil {
			auth(req)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b, resp.Header
	}
	bearer := func(key string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key) }
	}
	basic := func(user, pass string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth(user, pass) }
	}
	admin := bearer(adminKey.Plain)
	for i := 0; ; i++ {
		req, _ := http.NewRequest("GET", base+"/api/jobs?limit=1", nil)
		admin(req)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		require.Less(t, i, 300, "mailwatch ui never answered:\n%s", ui.log())
		time.Sleep(50 * time.Millisecond)
	}

	t.Run("Authentication", func(t *testing.T) {
		status, body, hdr := call(t, "GET", "/api/jobs", nil, nil)
		require.Equal(t, http.StatusUnauthorized, status)
		require.Contains(t, hdr.Get("WWW-Authenticate"), "Basic")
		require.Contains(t, string(body), `"detail"`)
		for _, tc := range []struct {
			auth   func(*http.Request)
			status int
		}{
			{admin, http.StatusOK},
			{basic("anyone", adminKey.Plain), http.StatusOK}, // a browser: the admin key as password
			{basic("ops", "correct horse battery"), http.StatusOK},
			{basic("ops", "correct horse battery!"), http.StatusUnauthorized},
			{basic("Ops", "correct horse battery"), http.StatusUnauthorized},
			{bearer(userKey.Plain), http.StatusForbidden}, // a valid key, not an admin's
			{bearer("mw_" + strings.Repeat("x", 40)), http.StatusUnauthorized},
			{bearer("nonsense"), http.StatusUnauthorized},
		} {
			status, body, _ := call(t, "GET", "/api/jobs", nil, tc.auth)
			require.Equal(t, tc.status, status, "%s", body)
		}
		// The embedded frontend is served too.
		status, body, hdr = call(t, "GET", "/", nil, admin)
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, hdr.Get("Content-Type"), "text/html")
		require.Contains(t, string(body), "River")
	})

	// emit stores an event whose delivery the receiver answers with status
	// (0: 204), set before the commit: the worker may push at once.
	emit := func(t *testing.T, status int) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		require.NoError(t, dbutil.WithTx(ctx, f.pool, func(ctx context.Context, tx pgx.Tx) error {
			ev, err := (&events.Emitter{River: f.client}).Emit(ctx, tx, events.Event{
				AccountID: f.account, Type: events.TypeReceiverMessageReceived,
				Payload: map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email"},
			})
			if err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, "SELECT id FROM webhook_deliveries WHERE event_id = $1", ev.ID).Scan(&id); err != nil {
				return err
			}
			if status != 0 {
				rc.set(id, status)
			}
			return nil
		}))
		return id
	}
	read := func(t *testing.T, id uuid.UUID) uiDelivery {
		t.Helper()
		var (
			d      uiDelivery
			class  *string
			state  *string
			output []byte
		)
		require.NoError(t, f.pool.QueryRow(ctx, `
			SELECT d.status, d.last_error_class, d.attempts, d.job_id, j.state::text, j.metadata->'output'
			FROM webhook_deliveries d LEFT JOIN river_job j ON j.id = d.job_id WHERE d.id = $1`, id).
			Scan(&d.status, &class, &d.attempts, &d.jobID, &state, &output))
		if class != nil {
			d.errorClass = *class
		}
		if state != nil {
			d.jobState = *state
		}
		if len(output) > 0 {
			require.NoError(t, json.Unmarshal(output, &d.output))
		}
		return d
	}
	var seen string // what the last condition saw, for a failure message
	waitFor := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		seen = ""
		for i := 0; !cond(); i++ {
			// Generous: under the whole race-enabled suite the worker can
			// be starved of CPU for a while.
			require.Less(t, i, 3600, "%s never happened (last seen: %s):\n%s", what, seen, worker.log())
			time.Sleep(50 * time.Millisecond)
		}
	}
	jobOf := func(t *testing.T, jobID int64) (state string, output map[string]any) {
		t.Helper()
		var raw []byte
		require.NoError(t, f.pool.QueryRow(ctx, "SELECT state::text, metadata->'output' FROM river_job WHERE id = $1", jobID).Scan(&state, &raw))
		if len(raw) > 0 {
			require.NoError(t, json.Unmarshal(raw, &output))
		}
		return state, output
	}
	action := func(t *testing.T, name string, jobID int64) {
		t.Helper()
		status, body, _ := call(t, "POST", "/api/jobs/"+name, map[string]any{"ids": []string{fmt.Sprint(jobID)}}, admin)
		require.Equal(t, http.StatusOK, status, "%s: %s", name, body)
	}
	failedEvents := func(t *testing.T, id uuid.UUID) int {
		return f.count(t, "SELECT count(*) FROM events WHERE event_type = 'webhook_delivery_failed' AND payload->>'delivery_id' = $1", id.String())
	}
	// snoozed emits an event whose endpoint answers 503 with Retry-After:
	// an hour: its job waits, scheduled, with the delivery pending.
	snoozed := func(t *testing.T) uuid.UUID {
		t.Helper()
		id := emit(t, http.StatusServiceUnavailable)
		waitFor(t, "the 503", func() bool {
			d := read(t, id)
			seen = fmt.Sprintf("%d pushes, delivery %+v", rc.count(id), d)
			return rc.count(id) == 1 && d.jobState == "scheduled"
		})
		return id
	}

	var delivered uuid.UUID
	t.Run("RetryOfADeliveredDeliverysCompletedJobSendsAgain", func(t *testing.T) {
		delivered = emit(t, 0)
		waitFor(t, "the first push", func() bool { d := read(t, delivered); return d.status == "delivered" && d.jobState == "completed" })
		job := read(t, delivered).jobID
		action(t, "retry", job)
		waitFor(t, "the re-send", func() bool { d := read(t, delivered); return rc.count(delivered) == 2 && d.jobState == "completed" })
		d := read(t, delivered)
		require.Equal(t, "delivered", d.status)
		require.Equal(t, int32(2), d.attempts)
		require.Equal(t, job, d.jobID)
		require.Nil(t, d.output, "a run that pushed has nothing to explain")
	})

	t.Run("ARescuedRunNeverSendsAgain", func(t *testing.T) {
		// What River's rescuer writes for a job whose worker died after the
		// push was recorded but before River completed the job.
		job := read(t, delivered).jobID
		_, err := f.pool.Exec(ctx, `UPDATE river_job SET state = 'retryable', scheduled_at = now(), finalized_at = NULL,
			errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', 'Stuck job rescued by JobRescuer', 'trace', ''))
			WHERE id = $1`, job)
		require.NoError(t, err)
		waitFor(t, "the rescued run", func() bool { s, out := jobOf(t, job); return s == "completed" && out != nil })
		_, out := jobOf(t, job)
		require.Equal(t, deliveries.SkipAlreadyDelivered, out["reason"])
		require.Equal(t, false, out["sent"])
		require.Contains(t, out["detail"], "never pushes again")
		require.Equal(t, 2, rc.count(delivered), "no push after a rescue")
		require.Equal(t, "delivered", read(t, delivered).status)
	})

	t.Run("CancelFailsTheDeliveryAtOnceAndRetrySendsIt", func(t *testing.T) {
		id := snoozed(t)
		job := read(t, id).jobID
		action(t, "cancel", job)
		d := read(t, id) // no reconciler has run: the UI converged the row
		require.Equal(t, "failed", d.status)
		require.Equal(t, "job_cancelled", d.errorClass)
		require.Equal(t, "cancelled", d.jobState)
		require.Equal(t, 1, failedEvents(t, id), "a delivery that ends failed emits webhook_delivery_failed")
		require.False(t, deliveries.AwaitsReconcile(d.status, d.jobState))

		rc.set(id, http.StatusNoContent)
		action(t, "retry", job)
		// Queued again as the UI answered, unless the worker already took
		// the job (it then moves the row itself, as it runs).
		if d := read(t, id); d.jobState != "running" && d.jobState != "completed" {
			require.Contains(t, []string{"pending", "retrying", "delivered"}, d.status, "queued again as the UI answered")
		}
		waitFor(t, "the push after the retry", func() bool { return read(t, id).status == "delivered" })
		require.Equal(t, 2, rc.count(id))
	})

	t.Run("DeleteFailsTheDeliveryAtOnce", func(t *testing.T) {
		id := snoozed(t)
		job := read(t, id).jobID
		action(t, "delete", job)
		d := read(t, id)
		require.Equal(t, "failed", d.status)
		require.Equal(t, "job_gone", d.errorClass)
		require.Empty(t, d.jobState, "the job is gone")
		require.Equal(t, 1, failedEvents(t, id))
		require.Equal(t, 1, rc.count(id))
	})

	t.Run("RetryOfAnOldJobSaysWhichJobOwnsTheDelivery", func(t *testing.T) {
		id := snoozed(t)
		old := read(t, id).jobID
		action(t, "cancel", old)
		// The API's retry made a newer job, due in an hour.
		require.NoError(t, dbutil.WithTx(ctx, f.pool, func(ctx context.Context, tx pgx.Tx) error {
			res, err := f.client.InsertTx(ctx, tx, events.DeliveryArgs{DeliveryID: id}, &river.InsertOpts{
				MaxAttempts: 1, ScheduledAt: time.Now().Add(time.Hour),
			})
			if err != nil {
				return err
			}
			_, err = dbsqlc.New().DeliveryRequeue(ctx, tx, dbsqlc.DeliveryRequeueParams{Ids: []uuid.UUID{id}, JobIds: []int64{res.Job.ID}, NextRetryAt: res.Job.ScheduledAt})
			return err
		}))
		owner := read(t, id).jobID
		action(t, "retry", old)
		waitFor(t, "the old job's run", func() bool { s, _ := jobOf(t, old); return s == "completed" })
		_, out := jobOf(t, old)
		require.Equal(t, deliveries.SkipOwnedByOtherJob, out["reason"])
		require.EqualValues(t, owner, out["owner_job_id"])
		require.Contains(t, out["detail"], fmt.Sprintf("job %d (scheduled) owns this delivery", owner))
		require.Equal(t, 1, rc.count(id), "nothing sent")
		// River UI shows the output: it is in the job's metadata.
		status, body, _ := call(t, "GET", fmt.Sprintf("/api/jobs/%d", old), nil, admin)
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, string(body), deliveries.SkipOwnedByOtherJob)
	})

	t.Run("TagsFindAnAccountsJobs", func(t *testing.T) {
		list := func(tag string) []int64 {
			status, body, _ := call(t, "GET", "/api/jobs?state=completed&limit=100&tags="+tag, nil, admin)
			require.Equal(t, http.StatusOK, status, "%s", body)
			var page struct {
				Data []struct {
					ID   int64    `json:"id"`
					Kind string   `json:"kind"`
					Tags []string `json:"tags"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(body, &page))
			var ids []int64
			for _, j := range page.Data {
				require.Equal(t, events.DeliveryKind, j.Kind)
				require.Contains(t, j.Tags, tag)
				ids = append(ids, j.ID)
			}
			return ids
		}
		require.NotEmpty(t, list("account-"+f.account.String()), "the completed delivery jobs of the account")
		require.NotEmpty(t, list("event-"+events.TypeReceiverMessageReceived))
		require.Empty(t, list("account-"+uuid.NewString()))
	})

	t.Run("RetryWithTheSubscriptionDisabledSaysWhyAndFails", func(t *testing.T) {
		id := snoozed(t)
		job := read(t, id).jobID
		action(t, "cancel", job)
		require.Equal(t, 1, failedEvents(t, id))
		_, err := f.pool.Exec(ctx, "UPDATE event_subscriptions SET enabled = false, disabled_reason = 'operator' WHERE account_id = $1", f.account)
		require.NoError(t, err)

		action(t, "retry", job)
		// The run's own end: cancelled with its output (the operator's first
		// cancel left the job cancelled too, without one).
		waitFor(t, "the disabled run", func() bool {
			s, out := jobOf(t, job)
			return s == "cancelled" && out["reason"] != nil && read(t, id).status == "failed"
		})
		_, out := jobOf(t, job)
		require.Equal(t, deliveries.SkipSubscriptionDisabled, out["reason"])
		require.Contains(t, out["detail"], "enable it")
		d := read(t, id)
		require.Equal(t, "subscription_disabled", d.errorClass)
		require.Equal(t, 2, failedEvents(t, id), "the retry ended failed again, and says so")
		require.Equal(t, 1, rc.count(id))

		// A delivered delivery stays delivered; its job says why it sent nothing.
		djob := read(t, delivered).jobID
		action(t, "retry", djob)
		waitFor(t, "the delivered job's run", func() bool { s, out := jobOf(t, djob); return s == "cancelled" && out["reason"] != nil })
		_, out = jobOf(t, djob)
		require.Equal(t, deliveries.SkipSubscriptionDisabled, out["reason"])
		require.Equal(t, "delivered", read(t, delivered).status)
		require.Equal(t, 2, rc.count(delivered))
	})
	t.Run("FailedLoginsAreLimited", func(t *testing.T) {
		// Last: it locks this address out for the rest of the minute.
		limited := false
		for i := 0; i < 25 && !limited; i++ {
			status, _, _ := call(t, "GET", "/api/jobs", nil, basic("ops", fmt.Sprintf("guess %d", i)))
			limited = status == http.StatusTooManyRequests
		}
		require.True(t, limited, "guessing passwords is limited")
		status, body, hdr := call(t, "GET", "/api/jobs", nil, basic("ops", "one more guess"))
		require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
		require.NotEmpty(t, hdr.Get("Retry-After"))
		require.Contains(t, string(body), "too many failed logins")
		// An admin behind the same address, presenting another identity, is
		// not locked out by someone else's guesses.
		status, body, _ = call(t, "GET", "/api/jobs", nil, admin)
		require.Equal(t, http.StatusOK, status, "%s", body)
		// Spraying many identities from one address hits the address's cap,
		// which then refuses everyone from it.
		limited = false
		for i := 0; i < 250 && !limited; i++ {
			status, _, _ = call(t, "GET", "/api/jobs", nil, basic(fmt.Sprintf("user%d", i), "guess"))
			limited = status == http.StatusTooManyRequests
		}
		require.True(t, limited, "one address's failures are capped across identities")
		status, body, _ = call(t, "GET", "/api/jobs", nil, admin)
		require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
	})
}

// FuzzJobActionIDs checks that reading the ids of a River UI job action
// never panics and returns only ids present in the body.
func FuzzJobActionIDs(f *testing.F) {
	for _, s := range []string{`{"ids":["1","2"]}`, `{"ids":[3]}`, `{"ids":["x",null,{}]}`, `{"ids":"1"}`, `[]`, ``, `{"ids":["9223372036854775808"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, id := range jobActionIDs(body) {
			require.Contains(t, string(body), fmt.Sprint(id))
		}
	})
}
