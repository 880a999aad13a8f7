package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
)

// auditRows returns the account's audit events about alertID.
func (b *testBundle) auditRows(t *testing.T, accountID, alertID string) []eventJSON {
	t.Helper()
	rows, err := b.db.Query(context.Background(),
		`SELECT id, event_type, payload FROM events WHERE account_id = $1 AND event_type IN ('alert_acknowledged', 'alert_unacknowledged')
		   AND payload->>'alert_id' = $2 ORDER BY created_at, id`, accountID, alertID)
	require.NoError(t, err)
	defer rows.Close()
	var out []eventJSON
	for rows.Next() {
		var e eventJSON
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id, &e.EventType, &e.Payload))
		e.ID = id.String()
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

func ackPath(id string) string { return "/api/accounts/me/alerts/" + id + "/acknowledge" }

func TestAlertAcknowledgement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, other := b.createAccount(t), b.createAccount(t)
	alert := b.emit(t, a.ID, events.Event{Type: events.TypeHealthScoreChanged, Severity: events.SeverityCritical, Domain: "example.com", Tags: []string{"prod"}})
	info := b.emit(t, a.ID, events.Event{Type: events.TypeDMARCReportReceived})
	theirs := b.emit(t, other.ID, events.Event{Type: events.TypeBounceSpike, Severity: events.SeverityCritical})
	id := alert.ID.String()

	t.Run("Validation", func(t *testing.T) {
		for _, body := range []any{
			map[string]any{},
			map[string]any{"acknowledged_by": ""},
			map[string]any{"acknowledged_by": "   "},
			map[string]any{"acknowledged_by": strings.Repeat("x", 201)},
			map[string]any{"acknowledged_by": "alice", "note": strings.Repeat("n", 2001)},
			map[string]any{"acknowledged_by": "alice", "colour": "red"},
		} {
			resp := b.do(t, "POST", ackPath(id), a.Key, body)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%v: %s", body, resp.Body)
		}
		require.Equal(t, http.StatusBadRequest, b.do(t, "POST", ackPath(id), a.Key, `{"acknowledged_by": 5}`).Status)
		require.Empty(t, b.auditRows(t, a.ID, id), "refused requests write no audit row")
	})

	t.Run("NotAnAlertIsNotFound", func(t *testing.T) {
		for _, target := range []string{info.ID.String(), theirs.ID.String(), uuid.Must(uuid.NewV7()).String(), "not-a-uuid"} {
			for _, method := range []string{"POST", "DELETE"} {
				var body any
				if method == "POST" {
					body = map[string]string{"acknowledged_by": "alice"}
				}
				resp := b.do(t, method, ackPath(target), a.Key, body)
				require.Equal(t, http.StatusNotFound, resp.Status, "%s %s: %s", method, target, resp.Body)
			}
		}
		// The other account's alert is untouched and still its own.
		var acked bool
		require.NoError(t, b.db.QueryRow(context.Background(), "SELECT acknowledged_at IS NOT NULL FROM events WHERE id = $1", theirs.ID).Scan(&acked))
		require.False(t, acked)
	})

	t.Run("DeleteOnUnacknowledgedIsConflict", func(t *testing.T) {
		resp := b.do(t, "DELETE", ackPath(id), a.Key, nil)
		require.Equal(t, http.StatusConflict, resp.Status)
		require.Contains(t, resp.Detail(t), "not acknowledged")
		require.Empty(t, b.auditRows(t, a.ID, id))
	})

	t.Run("Acknowledge", func(t *testing.T) {
		resp := b.do(t, "POST", ackPath(id), a.Key, map[string]string{"acknowledged_by": "alice@example.com", "note": "restored the DMARC record"})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var got eventJSON
		resp.JSON(t, &got)
		require.Equal(t, id, got.ID)
		require.True(t, got.Acknowledged)
		require.Equal(t, "alice@example.com", *got.AcknowledgedBy)
		require.Equal(t, "restored the DMARC record", *got.Note)
		require.Equal(t, a.Key[:7], *got.AckKey)
		require.WithinDuration(t, time.Now(), *got.AcknowledgedAt, time.Minute)

		audit := b.auditRows(t, a.ID, id)
		require.Len(t, audit, 1)
		require.Equal(t, events.TypeAlertAcknowledged, audit[0].EventType)
		require.NoError(t, events.ValidatePayload(audit[0].EventType, audit[0].Payload))
		require.JSONEq(t, fmt.Sprintf(`{"alert_id":%q,"alert_type":"health_score_changed","acknowledged_by":"alice@example.com",
			"note":"restored the DMARC record","key_identifier":%q}`, id, a.Key[:7]), string(audit[0].Payload))
	})

	t.Run("AcknowledgeTwiceIsConflict", func(t *testing.T) {
		resp := b.do(t, "POST", ackPath(id), a.Key, map[string]string{"acknowledged_by": "bob"})
		require.Equal(t, http.StatusConflict, resp.Status)
		require.Contains(t, resp.Detail(t), "already acknowledged")
		require.Len(t, b.auditRows(t, a.ID, id), 1, "a refused transition writes no audit row")
		var by string
		require.NoError(t, b.db.QueryRow(context.Background(), "SELECT acknowledged_by FROM events WHERE id = $1", alert.ID).Scan(&by))
		require.Equal(t, "alice@example.com", by)
	})

	t.Run("Unacknowledge", func(t *testing.T) {
		resp := b.do(t, "DELETE", ackPath(id), a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var got eventJSON
		resp.JSON(t, &got)
		require.False(t, got.Acknowledged)
		require.Nil(t, got.AcknowledgedBy)
		require.Nil(t, got.AcknowledgedAt)
		require.Nil(t, got.Note)

		audit := b.auditRows(t, a.ID, id)
		require.Len(t, audit, 2)
		require.Equal(t, events.TypeAlertUnacknowledged, audit[1].EventType)
		require.JSONEq(t, fmt.Sprintf(`{"alert_id":%q,"alert_type":"health_score_changed","previously_acknowledged_by":"alice@example.com",
			"previous_note":"restored the DMARC record","key_identifier":%q}`, id, a.Key[:7]), string(audit[1].Payload))

		require.Equal(t, http.StatusConflict, b.do(t, "DELETE", ackPath(id), a.Key, nil).Status)
		require.Len(t, b.auditRows(t, a.ID, id), 2)
	})

	t.Run("AcknowledgeAgainWithoutNote", func(t *testing.T) {
		resp := b.do(t, "POST", ackPath(id), a.Key, map[string]string{"acknowledged_by": "bob"})
		require.Equal(t, http.StatusOK, resp.Status)
		var got eventJSON
		resp.JSON(t, &got)
		require.Nil(t, got.Note)
		audit := b.auditRows(t, a.ID, id)
		require.Len(t, audit, 3)
		require.NoError(t, events.ValidatePayload(audit[2].EventType, audit[2].Payload))
	})

	t.Run("AuditEventsCarryTheAlertsDomain", func(t *testing.T) {
		got, _ := b.listAll(t, "/api/accounts/me/events?event_type=alert_acknowledged", a.Key)
		require.Len(t, got, 2)
		require.Equal(t, "example.com", *got[0].Domain)
		require.Equal(t, []string{"prod"}, got[0].Tags)
		got, _ = b.listAll(t, "/api/accounts/me/events?event_type=alert_acknowledged", other.Key)
		require.Empty(t, got)
	})
}

func TestListAlerts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, other := b.createAccount(t), b.createAccount(t)
	base := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	var acked, unacked []string
	for i := 0; i < 7; i++ {
		row := b.emit(t, a.ID, events.Event{Type: events.TypeBounceSpike, Severity: events.SeverityCritical, At: base.Add(time.Duration(i/2) * time.Second)})
		b.emit(t, a.ID, events.Event{Type: events.TypeBounceSpike, At: base.Add(time.Duration(i) * time.Second)}) // a warning: not an alert
		b.emit(t, other.ID, events.Event{Type: events.TypeBounceSpike, Severity: events.SeverityCritical, At: base})
		if i%3 == 0 {
			resp := b.do(t, "POST", ackPath(row.ID.String()), a.Key, map[string]string{"acknowledged_by": "ops"})
			require.Equal(t, http.StatusOK, resp.Status)
			acked = append(acked, row.ID.String())
		} else {
			unacked = append(unacked, row.ID.String())
		}
	}
	check := func(query string, want []string) {
		t.Helper()
		for _, limit := range []string{"1", "2", "50"} {
			got, _ := b.listAll(t, "/api/accounts/me/alerts?limit="+limit+"&"+query, a.Key)
			require.ElementsMatch(t, want, ids(got), query)
			for i, e := range got {
				require.Equal(t, "critical", e.Severity)
				if i > 0 {
					if strings.Contains(query, "order=asc") {
						require.False(t, e.CreatedAt.Before(got[i-1].CreatedAt))
					} else {
						require.False(t, e.CreatedAt.After(got[i-1].CreatedAt))
					}
				}
				isAcked := false
				for _, x := range acked {
					isAcked = isAcked || x == e.ID
				}
				require.Equal(t, isAcked, e.Acknowledged)
				if e.Acknowledged {
					require.Equal(t, "ops", *e.AcknowledgedBy)
				}
			}
		}
	}
	all := append(append([]string{}, acked...), unacked...)
	for _, order := range []string{"order=desc", "order=asc"} {
		check(order, all)
		check(order+"&acknowledged=true", acked)
		check(order+"&acknowledged=false", unacked)
		check(order+"&acknowledged=false&since="+base.Add(time.Second).Format(time.RFC3339), unacked[2:])
	}
	require.Equal(t, http.StatusBadRequest, b.do(t, "GET", "/api/accounts/me/alerts?acknowledged=maybe", a.Key, nil).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", "/api/accounts/me/alerts?limit=201", a.Key, nil).Status)
	require.Equal(t, http.StatusBadRequest, b.do(t, "GET", "/api/accounts/me/alerts?since=yesterday", a.Key, nil).Status)
	require.Equal(t, http.StatusBadRequest, b.do(t, "GET", "/api/accounts/me/alerts?cursor=%%%", a.Key, nil).Status)
}

// TestAcknowledgeConcurrently races acknowledgements of one alert on
// committed data: exactly one wins, every other gets 409, and exactly one
// audit event is written.
func TestAcknowledgeConcurrently(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	a := b.createAccount(t)
	alert := b.emit(t, a.ID, events.Event{Type: events.TypeBounceSpike, Severity: events.SeverityCritical})

	const n = 16
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp := b.do(t, "POST", ackPath(alert.ID.String()), a.Key, map[string]string{"acknowledged_by": fmt.Sprintf("racer %d", i)})
			statuses <- resp.Status
		}()
	}
	close(start)
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusConflict: n - 1}, counts)
	require.Len(t, b.auditRows(t, a.ID, alert.ID.String()), 1)
}

// TestAcknowledgeIsAtomic makes the audit insert fail inside the
// transition's transaction (a trigger refuses it) and checks that the
// acknowledgement rolled back with it.
func TestAcknowledgeIsAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	a := b.createAccount(t)
	alert := b.emit(t, a.ID, events.Event{Type: events.TypeBounceSpike, Severity: events.SeverityCritical})
	id := alert.ID.String()
	_, err := pool.Exec(ctx, `
		CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'audit store unavailable'; END $$;
		CREATE TRIGGER refuse_audit BEFORE INSERT ON events FOR EACH ROW
		WHEN (NEW.event_type IN ('alert_acknowledged', 'alert_unacknowledged')) EXECUTE FUNCTION refuse_audit();`)
	require.NoError(t, err)

	resp := b.do(t, "POST", ackPath(id), a.Key, map[string]string{"acknowledged_by": "alice"})
	require.Equal(t, http.StatusInternalServerError, resp.Status)
	require.NotContains(t, string(resp.Body), "audit store", "a 500 reveals nothing")
	var acked bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT acknowledged_at IS NOT NULL FROM events WHERE id = $1", alert.ID).Scan(&acked))
	require.False(t, acked, "the acknowledgement rolled back with its audit event")
	require.Empty(t, b.auditRows(t, a.ID, id))

	_, err = pool.Exec(ctx, "ALTER TABLE events DISABLE TRIGGER refuse_audit")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, b.do(t, "POST", ackPath(id), a.Key, map[string]string{"acknowledged_by": "alice"}).Status)
	_, err = pool.Exec(ctx, "ALTER TABLE events ENABLE TRIGGER refuse_audit")
	require.NoError(t, err)

	require.Equal(t, http.StatusInternalServerError, b.do(t, "DELETE", ackPath(id), a.Key, nil).Status)
	require.NoError(t, pool.QueryRow(ctx, "SELECT acknowledged_at IS NOT NULL FROM events WHERE id = $1", alert.ID).Scan(&acked))
	require.True(t, acked, "the withdrawal rolled back with its audit event")
	require.Len(t, b.auditRows(t, a.ID, id), 1)
}
