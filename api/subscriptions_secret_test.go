package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// TestRotateSecretThroughTheAPI: the rotation answers the new secret once;
// a push during the grace (here the test push, signed as every push is)
// verifies under the old and the new secret with the official library; a
// rotation without grace leaves only the newest; bounds and other
// accounts' ids are refused.
func TestRotateSecretThroughTheAPI(t *testing.T) {
	t.Parallel()
	wb := setupWebhooks(t)
	wb.start(t)
	b := wb.testBundle
	acct := b.createAccount(t)
	rc := newHookReceiver(t, nil)
	sub := createSub(t, b, acct.Key, map[string]any{"url": rc.URL, "event_types": []string{"receiver_message_received"}})
	path := subsPath + "/" + sub.ID + "/secret/rotate"

	resp := b.do(t, "POST", path, acct.Key, map[string]any{"grace_period_seconds": 3600})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var rotated struct {
		SigningSecret           string     `json:"signing_secret"`
		SecretRotatedAt         *time.Time `json:"secret_rotated_at"`
		PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	}
	resp.JSON(t, &rotated)
	require.True(t, strings.HasPrefix(rotated.SigningSecret, "whsec_"))
	require.NotEqual(t, sub.SigningSecret, rotated.SigningSecret)
	require.NotNil(t, rotated.SecretRotatedAt)
	require.WithinDuration(t, rotated.SecretRotatedAt.Add(time.Hour), *rotated.PreviousSecretExpiresAt, time.Second)

	get := b.do(t, "GET", subsPath+"/"+sub.ID, acct.Key, nil)
	require.Equal(t, http.StatusOK, get.Status)
	require.NotContains(t, string(get.Body), rotated.SigningSecret, "the secret is shown once")
	require.NotContains(t, string(get.Body), "signing_secret")

	verifyAll := func(secrets ...string) []bool {
		resp := b.do(t, "POST", subsPath+"/"+sub.ID+"/test", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		h, body := rc.last()
		out := make([]bool, len(secrets))
		for i, s := range secrets {
			wh, err := standardwebhooks.NewWebhook(s)
			require.NoError(t, err)
			out[i] = wh.Verify(body, h) == nil
		}
		return out
	}
	require.Equal(t, []bool{true, true}, verifyAll(sub.SigningSecret, rotated.SigningSecret), "both verify during the grace")
	// A push of an event, through River, is signed the same way.
	d := wb.deliveryOf(t, acct.Key, wb.emitMessage(t, acct.ID))
	wb.waitDelivery(t, acct.Key, d.ID, is("delivered", 1))
	h, body := rc.last()
	require.Equal(t, d.ID, h.Get("webhook-id"))
	for _, secret := range []string{sub.SigningSecret, rotated.SigningSecret} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h), "a pushed event verifies under each secret during the grace")
	}

	resp = b.do(t, "POST", path, acct.Key, map[string]any{"grace_period_seconds": 0})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var now struct {
		SigningSecret           string     `json:"signing_secret"`
		PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	}
	resp.JSON(t, &now)
	require.Nil(t, now.PreviousSecretExpiresAt)
	require.Equal(t, []bool{false, false, true}, verifyAll(sub.SigningSecret, rotated.SigningSecret, now.SigningSecret))

	resp = b.do(t, "POST", path, acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "an empty body takes the default grace: %s", resp.Body)

	for body, field := range map[string]string{
		`{"grace_period_seconds": 604801}`:     "grace_period_seconds",
		`{"grace_period_seconds": -1}`:         "grace_period_seconds",
		`{"signing_secret": "whsec_c2hvcnQ="}`: "signing_secret",
	} {
		resp = b.do(t, "POST", path, acct.Key, []byte(body))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s: %s", body, resp.Body)
		require.Contains(t, resp.Detail(t), field)
	}

	other := b.createAccount(t)
	resp = b.do(t, "POST", path, other.Key, nil)
	require.Equal(t, http.StatusNotFound, resp.Status, "another account's subscription is not found")
}

// TestSubscriptionBoundsThroughTheAPI: the bounds are set on create,
// changed and removed by PATCH, and refused out of range with the field.
func TestSubscriptionBoundsThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	rc := newHookReceiver(t, nil)
	type bounds struct {
		MaxPerSecond *int32 `json:"max_per_second"`
		MaxInFlight  *int32 `json:"max_in_flight"`
	}
	resp := b.do(t, "POST", subsPath, acct.Key, map[string]any{"url": rc.URL, "max_per_second": 10, "max_in_flight": 2})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var created struct {
		ID string `json:"id"`
		bounds
	}
	resp.JSON(t, &created)
	require.Equal(t, int32(10), *created.MaxPerSecond)
	require.Equal(t, int32(2), *created.MaxInFlight)

	resp = b.do(t, "PATCH", subsPath+"/"+created.ID, acct.Key, map[string]any{"max_per_second": nil, "max_in_flight": 5})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var got bounds
	resp.JSON(t, &got)
	require.Nil(t, got.MaxPerSecond, "null removes the bound")
	require.Equal(t, int32(5), *got.MaxInFlight)

	for body, field := range map[string]string{
		`{"max_in_flight": 0}`:     "max_in_flight",
		`{"max_in_flight": 101}`:   "max_in_flight",
		`{"max_per_second": 1001}`: "max_per_second",
	} {
		resp = b.do(t, "PATCH", subsPath+"/"+created.ID, acct.Key, []byte(body))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s: %s", body, resp.Body)
		require.Contains(t, resp.Detail(t), field)
	}
	resp = b.do(t, "PATCH", subsPath+"/"+created.ID, acct.Key, []byte(`{"max_per_second": "ten"}`))
	require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "integer")
	resp = b.do(t, "POST", subsPath, acct.Key, map[string]any{"url": rc.URL, "max_in_flight": 0})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), "max_in_flight")
}
