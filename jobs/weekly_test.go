package jobs

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jhillyerd/enmime"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/notify/smtptest"
	"github.com/mailwatch/mailwatch/internal/weekly"
)

// TestWeeklyDigest: the hourly schedule queues the last whole week's
// digest for an account with a verified address, the job mails it to the
// loopback relay (text and HTML, even with no report) and records the
// week; a second run mails nothing. An account that turned it off gets
// none; one that chose it instead of the daily digest gets no daily one.
func TestWeeklyDigest(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Options{})
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC) // Tuesday
	e := newNotifyEnv(t, srv.Addr(), now)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `INSERT INTO domains (id, account_id, name) VALUES (gen_random_uuid(), $1, 'weekly.example')`, e.account)
	require.NoError(t, err)
	off := uuid.Must(uuid.NewV7())
	_, err = e.pool.Exec(ctx, "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", off, off.String()+"@example.com")
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO notification_addresses (id, account_id, email, verified_at) VALUES (gen_random_uuid(), $1, 'off@example.com', now())`, off)
	require.NoError(t, err)
	_, err = weekly.Save(ctx, e.pool, off, weekly.Settings{Enabled: false})
	require.NoError(t, err)

	run := func() {
		res, err := e.client.Insert(ctx, WeeklyScheduleArgs{}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			j, err := e.client.JobGet(ctx, res.Job.ID)
			require.NoError(t, err)
			return j.State == rivertype.JobStateCompleted
		}, 30*time.Second, 20*time.Millisecond)
	}
	run()
	m := srv.Wait(t, 1)[0]
	require.Equal(t, []string{"ops@example.com"}, m.To)
	env, err := enmime.ReadEnvelope(bytes.NewReader(m.Data))
	require.NoError(t, err)
	require.Equal(t, "[mailwatch] Week of Nov 16: no DMARC reports arrived", env.GetHeader("Subject"))
	require.Contains(t, env.Text, "weekly.example")
	require.Contains(t, env.HTML, `href="`+testDashboard+`/domains/weekly.example"`)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM weekly_digests WHERE account_id = $1 AND week = '2026-11-16'`, e.account).Scan(&n))
		return n == 1
	}, 30*time.Second, 20*time.Millisecond)

	// Recorded: the schedule queues nothing more, and the job itself (run
	// again) sends nothing.
	run()
	deps := Deps{Pool: e.pool, Mail: &notify.Mailer{Relay: mustRelay(t, srv.Addr()), From: "a@mailwatch.test", BaseURL: testDashboard},
		Now: func() time.Time { return now }}.withDefaults()
	w := &WeeklyDigestWorker{deps: deps}
	require.NoError(t, w.Work(ctx, &river.Job[WeeklyDigestArgs]{Args: WeeklyDigestArgs{AccountID: e.account, Week: "2026-11-16"}}))
	require.NoError(t, w.Work(ctx, &river.Job[WeeklyDigestArgs]{Args: WeeklyDigestArgs{AccountID: off, Week: "2026-11-16"}}))
	require.Len(t, srv.Messages(), 1, "one mail: the week is recorded and the other account turned it off")
	err = w.Work(ctx, &river.Job[WeeklyDigestArgs]{Args: WeeklyDigestArgs{AccountID: e.account, Week: "2026-11-17"}})
	var cancel *rivertype.JobCancelError
	require.ErrorAs(t, err, &cancel, "a week starts on a Monday")

	// The weekly digest instead of the daily one: no daily digest.
	_, err = weekly.Save(ctx, e.pool, e.account, weekly.Settings{Enabled: true, ReplaceDaily: true})
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, domain, payload, rendered, created_at)
		VALUES (gen_random_uuid(), $1, 'bounce_spike', 'warning', 'weekly.example', '{}', '{}', $2)`, e.account, now.Add(-24*time.Hour))
	require.NoError(t, err)
	daily := func() *rivertype.JobRow {
		// The job is unique by its args: the one before goes first.
		_, err := e.pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'notify_digest'`)
		require.NoError(t, err)
		res, err := e.client.Insert(ctx, DigestArgs{AccountID: e.account, Day: "2026-11-23"}, nil)
		require.NoError(t, err)
		var j *rivertype.JobRow
		require.Eventually(t, func() bool {
			j, err = e.client.JobGet(ctx, res.Job.ID)
			require.NoError(t, err)
			return j.State == rivertype.JobStateCompleted
		}, 30*time.Second, 20*time.Millisecond)
		return j
	}
	require.Contains(t, string(daily().Output()), "weekly digest instead")
	require.Len(t, srv.Messages(), 1)
	_, err = weekly.Save(ctx, e.pool, e.account, weekly.Settings{Enabled: true})
	require.NoError(t, err)
	daily()
	require.Len(t, srv.Wait(t, 2), 2, "the daily digest again, once the account keeps both")
}
