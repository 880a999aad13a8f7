package api_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/jobs"
)

// mailgunEvent is one signed Mailgun webhook body under key.
type mailgunEvent struct {
	key, token, id, event, severity, recipient, detail string
}

func (e mailgunEvent) body(t *testing.T, at time.Time) []byte {
	t.Helper()
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(e.key))
	m.Write([]byte(ts + e.token))
	body, err := json.Marshal(map[string]any{
		"signature": map[string]string{"timestamp": ts, "token": e.token, "signature": hex.EncodeToString(m.Sum(nil))},
		"event-data": map[string]any{
			"id": e.id, "timestamp": at.Unix(), "event": e.event, "severity": e.severity, "reason": "bounce",
			"recipient": e.recipient, "envelope": map[string]string{"sender": "news@victim.example"},
			"delivery-status": map[string]any{"code": 550, "description": e.detail},
			"message":         map[string]any{"headers": map[string]string{"message-id": "m-" + e.token}},
		},
	})
	require.NoError(t, err)
	return body
}

// TestProviderIngressTenantIsolation is the hostile probe's sequence on a
// real server, pool and River worker: an attacker signs Mailgun payloads
// whose strings hold \u0000 with a provider key it chose, concurrently with
// a victim's 105 ordinary payloads, so the ingress batches them together
// and one job normalises both tenants' payloads. Every victim payload is
// normalised and its hard bounces suppressed; the attacker's payloads are
// normalised too, their NULs replaced.
func TestProviderIngressTenantIsolation(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	worker, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: logger}, jobs.Options{Concurrency: 4, Queues: []string{queues.Default}})
	require.NoError(t, err)
	finished, cancelSub := worker.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(cancelSub)
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = worker.Stop(stopCtx)
	})
	b := setup(t, func(o *setupOpts) {
		o.db = pool
		o.deps = func(d *api.Deps) { d.River = worker }
	})
	victim, attacker := b.createAccount(t), b.createAccount(t)
	const victimKey, attackerKey = "key-victim-0p6mqbf74lb20gzq9f4dhpn9rg3", "key-attacker-chose-this-one"
	vp := b.createProvider(t, victim.Key, "mailgun", "mg", map[string]any{"signing_key": victimKey})
	ap := b.createProvider(t, attacker.Key, "mailgun", "mg", map[string]any{"signing_key": attackerKey})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go b.srv.Serve(ln)
	t.Cleanup(func() { _ = b.srv.Shutdown(context.Background()) })
	base := "http://" + ln.Addr().String() + "/api/webhooks/providers/"

	type request struct {
		provider string
		body     []byte
	}
	now := time.Now()
	var reqs []request
	const victimPayloads, attackerPayloads, bounceEvery = 105, 20, 21
	for i := range victimPayloads {
		e := mailgunEvent{key: victimKey, token: fmt.Sprintf("victim-token-%03d", i), id: fmt.Sprintf("victim-%03d", i),
			event: "delivered", recipient: fmt.Sprintf("user%03d@customer.example", i)}
		if i%bounceEvery == 0 {
			e.event, e.severity, e.detail = "failed", "permanent", "550 5.1.1 no such user"
		}
		reqs = append(reqs, request{vp.ID, e.body(t, now)})
		if i%5 == 0 && i/5 < attackerPayloads {
			a := mailgunEvent{key: attackerKey, token: fmt.Sprintf("attacker-token-%03d", i), id: fmt.Sprintf("evt\x00%03d", i),
				event: "failed", severity: "permanent", recipient: fmt.Sprintf("x\x00%03d@attacker.example", i), detail: "nul \x00 here"}
			reqs = append(reqs, request{ap.ID, a.body(t, now)})
		}
	}
	require.Contains(t, string(reqs[1].body), `\u0000`)

	statuses := make([]int, len(reqs))
	answers := make([][]byte, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := http.Post(base+r.provider, "application/json", bytes.NewReader(r.body))
			if err != nil {
				answers[i] = []byte(err.Error())
				return
			}
			defer resp.Body.Close()
			statuses[i] = resp.StatusCode
			answers[i], _ = io.ReadAll(resp.Body)
		}()
	}
	close(start)
	wg.Wait()
	for i := range reqs {
		require.Equal(t, http.StatusOK, statuses[i], "request %d: %s", i, answers[i])
	}

	// Every normalising job has run once: each was enqueued with its
	// payloads before their requests were answered.
	rows, err := pool.Query(ctx, `SELECT id, args FROM river_job WHERE kind = 'provider_payload'`)
	require.NoError(t, err)
	type jobRow struct {
		ID   int64
		Args []byte
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[jobRow])
	require.NoError(t, err)
	payloadAccount := map[uuid.UUID]string{}
	prow, err := pool.Query(ctx, `SELECT id, account_id::text FROM provider_payloads`)
	require.NoError(t, err)
	for prow.Next() {
		var id uuid.UUID
		var acct string
		require.NoError(t, prow.Scan(&id, &acct))
		payloadAccount[id] = acct
	}
	require.NoError(t, prow.Err())
	require.Len(t, payloadAccount, len(reqs))
	waiting := map[int64]bool{}
	mixed := 0
	for _, j := range all {
		waiting[j.ID] = true
		var a providers.PayloadArgs
		require.NoError(t, json.Unmarshal(j.Args, &a))
		tenants := map[string]bool{}
		for _, id := range a.PayloadIDs {
			tenants[payloadAccount[id]] = true
		}
		if len(tenants) > 1 {
			mixed++
		}
		// Requests of both tenants may share a flush, but never a job: each
		// job is one account's, named in its args (its fairness bound).
		require.Equal(t, map[string]bool{a.AccountID.String(): true}, tenants, "job %d holds only its own account's payloads", j.ID)
	}
	require.Zero(t, mixed, "no job holds both tenants' payloads")
	// How requests share flushes depends on timing, so it is reported, not
	// asserted; TestIngesterWriteQueuesOneJobPerAccount (providers) pins a
	// flush of two accounts deterministically.
	t.Logf("%d requests, %d normalising jobs", len(reqs), len(all))
	for len(waiting) > 0 {
		ev := <-finished
		if ev.Job.Kind == (providers.PayloadArgs{}).Kind() {
			delete(waiting, ev.Job.ID)
		}
	}

	var processed, failed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE processed_at IS NOT NULL), count(*) FILTER (WHERE error IS NOT NULL)
		FROM provider_payloads WHERE account_id = $1`, victim.ID).Scan(&processed, &failed))
	require.Equal(t, victimPayloads, processed, "every victim payload is normalised")
	require.Zero(t, failed)
	var events, suppressed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM message_events WHERE account_id = $1`, victim.ID).Scan(&events))
	require.Equal(t, victimPayloads, events)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM suppressions WHERE account_id = $1 AND reason = 'hard_bounce'`, victim.ID).Scan(&suppressed))
	require.Equal(t, (victimPayloads+bounceEvery-1)/bounceEvery, suppressed, "the victim's hard bounces are suppressed")

	// The attacker's payloads are normalised with their NULs replaced.
	var attackerEvents int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM message_events WHERE account_id = $1 AND recipient LIKE 'x' || chr(65533) || '%'
		AND event_id LIKE 'evt' || chr(65533) || '%' AND detail = 'nul ' || chr(65533) || ' here'`, attacker.ID).Scan(&attackerEvents))
	require.Equal(t, attackerPayloads, attackerEvents)
}
