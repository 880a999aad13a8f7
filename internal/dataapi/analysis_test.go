package dataapi

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// seedAnalyzedMessage gives the account a receiver with one message
// received over SMTP and analysed (grade is the stored report's).
func seedAnalyzedMessage(t *testing.T, db dbutil.Executor, account uuid.UUID, grade string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	receiver, message := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	_, err := db.Exec(ctx, `INSERT INTO receivers (id, account_id, channel, label, address, ttl_seconds, expires_at, created_at)
		VALUES ($1, $2, 'email', 'l', $3, 3600, now() + interval '1 hour', now())`, receiver, account, receiver.String()+"@inbound.test")
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO receiver_messages (id, receiver_id, account_id, seq, channel, sender, parsed, raw,
		size_bytes, received_at, smtp_client_ip, smtp_helo, smtp_mail_from, smtp_tls_version, smtp_tls_cipher, analysis, analyzed_at)
		VALUES ($1, $2, $3, 1, 'email', 's@example.org', '{}', '\x01', 1, now(), '192.0.2.9', 'mta.example.org', 's@example.org',
		'TLS 1.3', 'TLS_AES_128_GCM_SHA256', jsonb_build_object('grade', $4::text, 'score', 85), now())`, message, receiver, account, grade)
	require.NoError(t, err)
	return message
}

// The data API reads the analysis and session of the caller's messages
// only (RLS), and never writes them.
func TestMessageAnalysisUnderRLS(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice, bob := seed(t, db, 0), seed(t, db, 0)
	mine := seedAnalyzedMessage(t, db, alice.id, "B")
	seedAnalyzedMessage(t, db, bob.id, "F")

	// Even a builder that forgets the account filter shows Alice hers only.
	buggy := &Runner{DB: db, opts: buildOptions{omitAccountFilter: true}}
	res, err := run(t, buggy, alice, "messages",
		"select=id,analysis,analyzed_at,smtp_client_ip,smtp_helo,smtp_mail_from,smtp_tls_version,smtp_tls_cipher", false, false)
	require.NoError(t, err)
	rows := rowsOf(t, res)
	require.Len(t, rows, 1)
	row := rows[0]
	require.Equal(t, mine.String(), row["id"])
	require.Equal(t, map[string]any{"grade": "B", "score": float64(85)}, row["analysis"])
	require.NotNil(t, row["analyzed_at"])
	require.Equal(t, "192.0.2.9", row["smtp_client_ip"])
	require.Equal(t, "mta.example.org", row["smtp_helo"])
	require.Equal(t, "s@example.org", row["smtp_mail_from"])
	require.Equal(t, "TLS 1.3", row["smtp_tls_version"])
	require.Equal(t, "TLS_AES_128_GCM_SHA256", row["smtp_tls_cipher"])

	// Filtering on the new columns works through the allow-list.
	res, err = run(t, &Runner{DB: db}, alice, "messages", "select=id&smtp_tls_version=eq.TLS%201.3", false, false)
	require.NoError(t, err)
	require.Len(t, rowsOf(t, res), 1)

	// In SQL, as PostgREST would: Bob's analysis is invisible, and no
	// analysis can be written.
	ctx := context.Background()
	sp, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = sp.Rollback(ctx) }()
	_, err = sp.Exec(ctx, `SET LOCAL ROLE authenticated`)
	require.NoError(t, err)
	_, err = sp.Exec(ctx, `SELECT set_config('request.jwt.claims', $1, true)`, string(alice.claims))
	require.NoError(t, err)
	var n int
	require.NoError(t, sp.QueryRow(ctx, `SELECT count(*) FROM data_api.messages WHERE account_id = $1 AND analysis IS NOT NULL`, bob.id).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, sp.QueryRow(ctx, `SELECT count(*) FROM receiver_messages WHERE analysis IS NOT NULL`).Scan(&n))
	require.Equal(t, 1, n)
	for _, sql := range []string{
		`UPDATE receiver_messages SET analysis = '{}'`,
		`UPDATE data_api.messages SET analyzed_at = now()`,
	} {
		err := dbutil.WithTx(ctx, sp, func(ctx context.Context, tx pgx.Tx) error { _, err := tx.Exec(ctx, sql); return err })
		require.ErrorContains(t, err, "permission denied", sql)
	}
}
