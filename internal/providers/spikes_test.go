package providers_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type spikeBundle struct {
	tx       pgx.Tx
	em       *events.Emitter
	account  uuid.UUID
	domain   uuid.UUID
	provider uuid.UUID
	seq      int
}

func setupSpikes(t *testing.T) *spikeBundle {
	t.Helper()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	b := &spikeBundle{tx: tx, em: &events.Emitter{River: client}, account: uuid.New(), domain: uuid.New(), provider: uuid.New()}
	_, err = tx.Exec(ctx, `INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')`, b.account, b.account.String()+"@example.com")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO domains (id, account_id, name) VALUES ($1, $2, 'mail.example.com')`, b.domain, b.account)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, 'ses', 'ses', '\x00', 'k')`, b.provider, b.account)
	require.NoError(t, err)
	return b
}

// add inserts n events of a type at a time.
func (b *spikeBundle) add(t *testing.T, typ, bounce string, n int, at time.Time) {
	t.Helper()
	b.seq++
	var class *string
	if bounce != "" {
		class = &bounce
	}
	_, err := b.tx.Exec(context.Background(), `
		INSERT INTO message_events (id, account_id, provider_id, provider_kind, event_id, event_type, bounce_class,
		                            recipient, recipient_hash, domain, domain_id, occurred_at)
		SELECT gen_random_uuid(), $1, $2, 'ses', $3 || '-' || g, $4, $5, 'r' || g || '@x.example', '\x00', 'mail.example.com', $6, $7
		FROM generate_series(1, $8::int) g`,
		b.account, b.provider, typ+"-"+time.Now().Format("150405.000000")+"-"+string(rune('a'+b.seq)), typ, class, b.domain, at, n)
	require.NoError(t, err)
}

func (b *spikeBundle) check(t *testing.T, now time.Time) []providers.SpikeChange {
	t.Helper()
	ch, err := providers.CheckSpikes(context.Background(), b.tx, b.em, b.domain, now, providers.DefaultSpikeRules)
	require.NoError(t, err)
	return ch
}

func (b *spikeBundle) spikes(t *testing.T, typ string) []string {
	t.Helper()
	rows, err := b.tx.Query(context.Background(), `SELECT severity FROM events WHERE account_id = $1 AND event_type = $2 ORDER BY created_at`, b.account, typ)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func TestSpikeEpisodes(t *testing.T) {
	t.Parallel()
	b := setupSpikes(t)
	now := time.Now()
	in := now.Add(-10 * time.Minute)

	// Under the minimum volume nothing is judged, whatever the rate.
	b.add(t, "sent", "", 100, in)
	b.add(t, "bounced", "hard", 50, in)
	require.Empty(t, b.check(t, now))

	// 1,000 recipients, 6% hard bounces: a warning.
	b.add(t, "sent", "", 900, in)
	b.add(t, "bounced", "hard", 10, in)
	ch := b.check(t, now)
	require.Len(t, ch, 1)
	require.True(t, ch[0].Started)
	require.Equal(t, []string{"warning"}, b.spikes(t, events.TypeBounceSpike))

	// More bounces in the same episode: no second event.
	b.add(t, "bounced", "hard", 100, in)
	require.Empty(t, b.check(t, now))
	require.Len(t, b.spikes(t, events.TypeBounceSpike), 1)

	// The window moves on: clean traffic ends the episode (hysteresis:
	// below 80% of the threshold)...
	later := now.Add(2 * time.Hour)
	b.add(t, "sent", "", 1000, later.Add(-5*time.Minute))
	b.add(t, "bounced", "hard", 10, later.Add(-5*time.Minute))
	ch = b.check(t, later)
	require.Len(t, ch, 1)
	require.False(t, ch[0].Started)

	// ...and a new burst is judged against the domain's baseline of the
	// days before the window (170 hard bounces of 2,000: 8.5%): 15% is over
	// the threshold but not twice the baseline, so no spike...
	evenLater := later.Add(2 * time.Hour)
	b.add(t, "sent", "", 1000, evenLater.Add(-5*time.Minute))
	b.add(t, "bounced", "hard", 150, evenLater.Add(-5*time.Minute))
	require.Empty(t, b.check(t, evenLater))
	require.Len(t, b.spikes(t, events.TypeBounceSpike), 1)
	// ...while 20% is, and starts a new episode.
	b.add(t, "bounced", "hard", 50, evenLater.Add(-5*time.Minute))
	ch = b.check(t, evenLater)
	require.Len(t, ch, 1)
	require.True(t, ch[0].Started)
	require.Equal(t, []string{"warning", "critical"}, b.spikes(t, events.TypeBounceSpike))

}

func TestSoftBouncesAndProviderSuppressionsNeverSpike(t *testing.T) {
	t.Parallel()
	b := setupSpikes(t)
	now := time.Now()
	b.add(t, "sent", "", 1000, now.Add(-time.Minute))
	b.add(t, "bounced", "soft", 500, now.Add(-time.Minute))
	b.add(t, "suppressed", "", 500, now.Add(-time.Minute))
	require.Empty(t, b.check(t, now))
}

func TestComplaintSpikeCritical(t *testing.T) {
	t.Parallel()
	b := setupSpikes(t)
	now := time.Now()
	b.add(t, "sent", "", 5000, now.Add(-time.Minute))
	b.add(t, "complained", "", 20, now.Add(-time.Minute)) // 0.4%
	ch := b.check(t, now)
	require.Len(t, ch, 1)
	require.Equal(t, providers.SpikeComplaint, ch[0].Kind)
	require.Equal(t, []string{"critical"}, b.spikes(t, events.TypeComplaintSpike))
	require.Empty(t, b.spikes(t, events.TypeBounceSpike))

	caps, err := providers.HealthCaps(context.Background(), b.tx, b.account, b.domain, now)
	require.NoError(t, err)
	require.Len(t, caps, 1)
	require.Equal(t, "complaint_rate", caps[0].Name)
	require.Equal(t, 45, caps[0].Max)
}
