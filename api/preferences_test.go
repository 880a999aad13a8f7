package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/notify"
)

type decisionJSON struct {
	Send bool   `json:"send"`
	Rule string `json:"rule"`
}

type prefsJSON struct {
	Mutes struct {
		Email   bool `json:"email"`
		Webhook bool `json:"webhook"`
	} `json:"mutes"`
	Groups []struct {
		Name     string `json:"name"`
		Required bool   `json:"required"`
		Set      bool   `json:"set"`
		Channels struct {
			Email   bool `json:"email"`
			Webhook bool `json:"webhook"`
		} `json:"channels"`
		Types []struct {
			EventType string `json:"event_type"`
			Override  struct {
				Email   *bool `json:"email"`
				Webhook *bool `json:"webhook"`
			} `json:"override"`
			Email   decisionJSON `json:"email"`
			Webhook decisionJSON `json:"webhook"`
		} `json:"types"`
	} `json:"groups"`
}

// decision finds a type's decisions in a preferences body.
func (p prefsJSON) decision(t *testing.T, typ string) (email, webhook decisionJSON) {
	t.Helper()
	for _, g := range p.Groups {
		for _, ty := range g.Types {
			if ty.EventType == typ {
				return ty.Email, ty.Webhook
			}
		}
	}
	t.Fatalf("type %s not in preferences", typ)
	return
}

func (b *testBundle) prefs(t *testing.T, method, path, key string, body any) prefsJSON {
	t.Helper()
	resp := b.do(t, method, path, key, body)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var p prefsJSON
	resp.JSON(t, &p)
	return p
}

func TestPreferences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	const base = "/api/accounts/me/preferences"

	t.Run("DefaultsAreOn", func(t *testing.T) {
		p := b.prefs(t, "GET", base, a.Key, nil)
		require.False(t, p.Mutes.Email)
		require.NotEmpty(t, p.Groups)
		for _, g := range p.Groups {
			require.False(t, g.Set)
			require.True(t, g.Channels.Email && g.Channels.Webhook)
			require.Equal(t, g.Name == "audit" || g.Name == "security", g.Required, g.Name)
		}
		e, w := p.decision(t, "health_score_changed")
		require.Equal(t, decisionJSON{true, "default"}, e)
		require.Equal(t, decisionJSON{true, "default"}, w)
		e, _ = p.decision(t, "alert_acknowledged")
		require.Equal(t, decisionJSON{true, "required"}, e)
	})
	t.Run("Group", func(t *testing.T) {
		p := b.prefs(t, "PUT", base+"/groups/health", a.Key, map[string]bool{"email": false, "webhook": true})
		e, w := p.decision(t, "health_score_changed")
		require.Equal(t, decisionJSON{false, "group"}, e)
		require.Equal(t, decisionJSON{true, "group"}, w)
		require.Equal(t, http.StatusNotFound, b.do(t, "PUT", base+"/groups/nope", a.Key, map[string]bool{"email": false, "webhook": true}).Status)
		resp := b.do(t, "PUT", base+"/groups/audit", a.Key, map[string]bool{"email": false, "webhook": false})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
		require.Contains(t, resp.Detail(t), "required")
		require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "PUT", base+"/groups/health", a.Key, map[string]bool{"email": false}).Status)
	})
	t.Run("Override", func(t *testing.T) {
		p := b.prefs(t, "PUT", base+"/overrides/health_score_changed", a.Key, map[string]any{"email": true})
		e, w := p.decision(t, "health_score_changed")
		require.Equal(t, decisionJSON{true, "override"}, e, "the override beats the group")
		require.Equal(t, decisionJSON{true, "group"}, w, "a channel left null follows the group")
		require.Equal(t, http.StatusNotFound, b.do(t, "PUT", base+"/overrides/nope", a.Key, map[string]any{"email": true}).Status)
		require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "PUT", base+"/overrides/alert_acknowledged", a.Key, map[string]any{"email": false}).Status)
		require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "PUT", base+"/overrides/bounce_spike", a.Key, map[string]any{}).Status)
	})
	t.Run("Mutes", func(t *testing.T) {
		p := b.prefs(t, "PUT", base+"/mutes", a.Key, map[string]bool{"email": true, "webhook": false})
		require.True(t, p.Mutes.Email)
		e, _ := p.decision(t, "health_score_changed")
		require.Equal(t, decisionJSON{false, "mute"}, e, "the mute beats the override")
		e, _ = p.decision(t, "alert_acknowledged")
		require.Equal(t, decisionJSON{true, "required"}, e)
		p = b.prefs(t, "PUT", base+"/mutes", a.Key, map[string]bool{"email": false, "webhook": false})
		e, _ = p.decision(t, "health_score_changed")
		require.Equal(t, decisionJSON{true, "override"}, e)
	})
	t.Run("DataAPIRows", func(t *testing.T) {
		tok := b.token(t, a.Key)
		resp := b.do(t, "GET", "/rest/v1/preference_groups?select=group_name,email,webhook", tok, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.JSONEq(t, `[{"group_name":"health","email":false,"webhook":true}]`, string(resp.Body))
		resp = b.do(t, "GET", "/rest/v1/preference_overrides?select=event_type,email,webhook", tok, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.JSONEq(t, `[{"event_type":"health_score_changed","email":true,"webhook":null}]`, string(resp.Body))
		other := b.createAccount(t)
		resp = b.do(t, "GET", "/rest/v1/preference_groups", b.token(t, other.Key), nil)
		require.Equal(t, http.StatusOK, resp.Status)
		require.JSONEq(t, `[]`, string(resp.Body))
		// Another account's preferences are its own.
		p := b.prefs(t, "GET", base, other.Key, nil)
		e, _ := p.decision(t, "health_score_changed")
		require.Equal(t, decisionJSON{true, "default"}, e)
	})
	t.Run("DeleteOverride", func(t *testing.T) {
		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", base+"/overrides/health_score_changed", a.Key, nil).Status)
		require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", base+"/overrides/health_score_changed", a.Key, nil).Status)
		p := b.prefs(t, "GET", base, a.Key, nil)
		e, _ := p.decision(t, "health_score_changed")
		require.Equal(t, decisionJSON{false, "group"}, e)
	})
}

type addressJSON struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Login    bool   `json:"login"`
	Verified bool   `json:"verified"`
}

func (b *testBundle) addresses(t *testing.T, key string) []addressJSON {
	t.Helper()
	resp := b.do(t, "GET", "/api/accounts/me/notification-addresses", key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var out []addressJSON
	resp.JSON(t, &out)
	return out
}

// verifyJobs counts the verification mail jobs queued for an address.
func (b *testBundle) verifyJobs(t *testing.T, addressID string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'address_id' = $2`, notify.VerifyEmailKind, addressID).Scan(&n))
	return n
}

// newToken does what the verification job does before it mails.
func (b *testBundle) newToken(t *testing.T, addressID string) string {
	t.Helper()
	token, _, ok, err := notify.NewToken(context.Background(), b.db, uuid.MustParse(addressID), time.Now())
	require.NoError(t, err)
	require.True(t, ok)
	return token
}

func TestNotificationAddresses(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now().UTC()}
	b := setup(t, func(o *setupOpts) { o.now = clock.Now })
	a := b.createAccount(t)
	const base = "/api/accounts/me/notification-addresses"
	// Addresses of this test's own: each address's verification mails are
	// counted across accounts.
	opsEmail := "ops-" + a.Email

	// Sign-up adds the login address, unverified, and queues its mail.
	list := b.addresses(t, a.Key)
	require.Len(t, list, 1)
	login := list[0]
	require.Equal(t, a.Email, login.Email)
	require.True(t, login.Login)
	require.False(t, login.Verified)
	require.Equal(t, 1, b.verifyJobs(t, login.ID))

	// Add, duplicate, verify (single use), remove.
	resp := b.do(t, "POST", base, a.Key, map[string]string{"email": strings.ToUpper(opsEmail)})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var ops addressJSON
	resp.JSON(t, &ops)
	require.Equal(t, opsEmail, ops.Email)
	require.False(t, ops.Verified)
	require.Equal(t, 1, b.verifyJobs(t, ops.ID))
	require.Equal(t, http.StatusConflict, b.do(t, "POST", base, a.Key, map[string]string{"email": opsEmail}).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", base, a.Key, map[string]string{"email": "not an address"}).Status)

	stale := b.newToken(t, ops.ID)
	token := b.newToken(t, ops.ID)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/api/notification-addresses/verify", "", map[string]string{"token": stale}).Status,
		"a newer token replaces the older one")
	resp = b.do(t, "POST", "/api/notification-addresses/verify", "", map[string]string{"token": token})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var verified addressJSON
	resp.JSON(t, &verified)
	require.True(t, verified.Verified)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/api/notification-addresses/verify", "", map[string]string{"token": token}).Status,
		"a token works once")

	// Resend: a new mail for an unverified address, nothing for a verified
	// one, once the address's last mail is a minute old.
	clock.Add(notify.RecipientCooldown)
	require.Equal(t, http.StatusAccepted, b.do(t, "POST", base+"/"+login.ID+"/resend", a.Key, nil).Status)
	require.Equal(t, 2, b.verifyJobs(t, login.ID))
	require.Equal(t, http.StatusAccepted, b.do(t, "POST", base+"/"+ops.ID+"/resend", a.Key, nil).Status)
	require.Equal(t, 1, b.verifyJobs(t, ops.ID))
	// A mail just sent cannot be asked for again at once: each lands in
	// somebody's inbox.
	resp = b.do(t, "POST", base+"/"+login.ID+"/resend", a.Key, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "less than a minute ago")
	require.Equal(t, "60", resp.Header.Get("Retry-After"))
	require.Equal(t, 2, b.verifyJobs(t, login.ID))

	// Another account sees none of them and cannot remove them.
	other := b.createAccount(t)
	require.Len(t, b.addresses(t, other.Key), 1)
	require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", base+"/"+ops.ID, other.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", base+"/"+ops.ID+"/resend", other.Key, nil).Status)

	// An email change replaces the login address, which must be verified
	// again; the other verified address is kept.
	loginToken := b.newToken(t, login.ID)
	require.Equal(t, http.StatusOK, b.do(t, "POST", "/api/notification-addresses/verify", "", map[string]string{"token": loginToken}).Status)
	newEmail := "changed-" + a.Email
	resp = b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"email": newEmail})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	list = b.addresses(t, a.Key)
	require.Len(t, list, 2)
	byEmail := map[string]addressJSON{}
	for _, x := range list {
		byEmail[x.Email] = x
	}
	require.NotContains(t, byEmail, a.Email)
	require.True(t, byEmail[newEmail].Login)
	require.False(t, byEmail[newEmail].Verified)
	require.Equal(t, 1, b.verifyJobs(t, byEmail[newEmail].ID))
	require.True(t, byEmail[opsEmail].Verified)
	// A password-only change leaves the addresses alone.
	require.Equal(t, http.StatusOK, b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"password": "another long password"}).Status)
	require.Equal(t, 1, b.verifyJobs(t, byEmail[newEmail].ID))

	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", base+"/"+ops.ID, a.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", base+"/"+ops.ID, a.Key, nil).Status)
	require.Len(t, b.addresses(t, a.Key), 1)

	// Each new address is mailed: an account has at most a few.
	for i := len(b.addresses(t, a.Key)); i < notify.MaxAddresses; i++ {
		resp = b.do(t, "POST", base, a.Key, map[string]string{"email": fmt.Sprintf("team%d-%s", i, a.Email)})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	resp = b.do(t, "POST", base, a.Key, map[string]string{"email": "one-too-many@example.com"})
	require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "at most")
}
