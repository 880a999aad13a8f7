package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/events"
)

// makeAdmin grants admin rights before the key is first used (the key
// cache would otherwise remember the old rights for a few seconds).
func (b *testBundle) makeAdmin(t *testing.T, a account) {
	t.Helper()
	_, err := b.db.Exec(context.Background(), "UPDATE accounts SET is_admin = true WHERE id = $1", a.ID)
	require.NoError(t, err)
}

func TestAdminInjectEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin, target, bystander := b.createAccount(t), b.createAccount(t), b.createAccount(t)
	b.makeAdmin(t, admin)
	path := "/api/admin/accounts/" + target.ID + "/events"
	ex, _ := events.Lookup(events.TypeHealthScoreChanged)
	// A fall of 6 points to 74: a warning by the type's rule.
	mild := json.RawMessage(`{"domain":"example.com","previous_score":80,"score":74,"delta":-6}`)
	valid := map[string]any{"event_type": ex.Name, "payload": mild, "domain": "Example.COM", "tags": []string{"prod"}}

	t.Run("NonAdminsSeeNoRoute", func(t *testing.T) {
		resp := b.do(t, "POST", path, bystander.Key, valid)
		require.Equal(t, http.StatusNotFound, resp.Status)
		resp = b.do(t, "POST", path, target.Key, valid)
		require.Equal(t, http.StatusNotFound, resp.Status)
		require.Equal(t, http.StatusUnauthorized, b.do(t, "POST", path, "", valid).Status)
	})

	t.Run("Refusals", func(t *testing.T) {
		for _, tc := range []struct {
			body   any
			status int
			field  string
		}{
			{map[string]any{"event_type": "no_such_type", "payload": map[string]any{}}, 422, "event_type"},
			{map[string]any{"event_type": ex.Name}, 422, "payload"},
			{map[string]any{"event_type": ex.Name, "payload": nil}, 422, "payload"},
			{map[string]any{"event_type": ex.Name, "payload": []int{1}}, 422, "payload"},
			{map[string]any{"event_type": ex.Name, "payload": map[string]any{"domain": "example.com", "previous_score": 80, "score": 101, "delta": 21}}, 422, "payload.score"},
			{map[string]any{"event_type": ex.Name, "payload": map[string]any{"domain": "example.com"}}, 422, "payload"},
			{map[string]any{"event_type": ex.Name, "payload": json.RawMessage(ex.Example), "severity": "loud"}, 422, "severity"},
			{map[string]any{"event_type": ex.Name, "payload": json.RawMessage(ex.Example), "domain": "com"}, 422, "domain"},
			{map[string]any{"event_type": ex.Name, "payload": json.RawMessage(ex.Example), "tags": []string{""}}, 422, "tags"},
		} {
			resp := b.do(t, "POST", path, admin.Key, tc.body)
			require.Equal(t, tc.status, resp.Status, "%v: %s", tc.body, resp.Body)
			var body struct {
				Detail string `json:"detail"`
				Errors []struct{ Field, Message string }
			}
			resp.JSON(t, &body)
			require.NotEmpty(t, body.Errors)
			require.True(t, strings.HasPrefix(body.Errors[0].Field, tc.field), "%s", resp.Body)
		}
		resp := b.do(t, "POST", "/api/admin/accounts/"+uuid.Must(uuid.NewV7()).String()+"/events", admin.Key, valid)
		require.Equal(t, http.StatusNotFound, resp.Status)
		require.Contains(t, resp.Detail(t), "account not found")
		require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/api/admin/accounts/nope/events", admin.Key, valid).Status)
		got, _ := b.listAll(t, "/api/accounts/me/events", target.Key)
		require.Empty(t, got, "refused injections emit nothing")
	})

	t.Run("EmitsLikeAProducer", func(t *testing.T) {
		resp := b.do(t, "POST", path, admin.Key, valid)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var created eventJSON
		resp.JSON(t, &created)
		require.Equal(t, "warning", created.Severity)
		require.Equal(t, "example.com", *created.Domain)
		require.JSONEq(t, string(mild), string(created.Payload))

		crit := map[string]any{"event_type": ex.Name, "payload": mild, "severity": "critical"}
		resp = b.do(t, "POST", path, admin.Key, crit)
		require.Equal(t, http.StatusCreated, resp.Status)
		var alert eventJSON
		resp.JSON(t, &alert)

		got, _ := b.listAll(t, "/api/accounts/me/events", target.Key)
		require.Equal(t, []string{alert.ID, created.ID}, ids(got))
		alerts, _ := b.listAll(t, "/api/accounts/me/alerts?acknowledged=false", target.Key)
		require.Equal(t, []string{alert.ID}, ids(alerts))
		mine, _ := b.listAll(t, "/api/accounts/me/events", admin.Key)
		require.Empty(t, mine, "the event is the target's, not the operator's")
	})

	t.Run("EscalationAppliesToEveryEmitter", func(t *testing.T) {
		// GET /events/types says health_score_changed is critical for a
		// fall that ends below 50; the admin route must agree, even when
		// the operator asks for less.
		for _, tc := range []struct {
			payload  string
			severity string
			want     string
		}{
			{`{"domain":"example.com","previous_score":60,"score":45,"delta":-15}`, "", "critical"},
			{`{"domain":"example.com","previous_score":60,"score":45,"delta":-15}`, "info", "critical"},
			{`{"domain":"example.com","previous_score":90,"score":70,"delta":-20}`, "", "critical"},
			{`{"domain":"example.com","previous_score":70,"score":80,"delta":10}`, "", "info"},
			{`{"domain":"example.com","previous_score":70,"score":80,"delta":10}`, "critical", "critical"},
		} {
			body := map[string]any{"event_type": ex.Name, "payload": json.RawMessage(tc.payload)}
			if tc.severity != "" {
				body["severity"] = tc.severity
			}
			resp := b.do(t, "POST", path, admin.Key, body)
			require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
			var got eventJSON
			resp.JSON(t, &got)
			require.Equal(t, tc.want, got.Severity, "%s asking for %q", tc.payload, tc.severity)
		}
		spike, _ := events.Lookup(events.TypeBounceSpike)
		resp := b.do(t, "POST", path, admin.Key, map[string]any{"event_type": spike.Name,
			"payload": map[string]any{"domain": "example.com", "window_minutes": 60, "rate": 0.1, "threshold": 0.05, "bounces": 50, "sent": 500}})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var got eventJSON
		resp.JSON(t, &got)
		require.Equal(t, "critical", got.Severity, "a rate twice the threshold is critical")
	})

	t.Run("EveryTypesExample", func(t *testing.T) {
		for _, typ := range events.Types() {
			resp := b.do(t, "POST", path, admin.Key, map[string]any{"event_type": typ.Name, "payload": typ.Example})
			require.Equal(t, http.StatusCreated, resp.Status, "%s: %s", typ.Name, resp.Body)
		}
	})

	t.Run("DocumentedAsAdminOnly", func(t *testing.T) {
		resp := b.do(t, "GET", "/openapi.json", "", nil)
		var doc struct {
			Paths map[string]map[string]struct {
				Description string `json:"description"`
			} `json:"paths"`
		}
		resp.JSON(t, &doc)
		desc := doc.Paths["/api/admin/accounts/{account_id}/events"]["post"].Description
		require.Contains(t, desc, "Admin only")
		require.Contains(t, desc, "mailwatch admin grant")
	})
}
