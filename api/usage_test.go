package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUsage(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 4, 20, 12, 0, 0, 0, time.UTC)
	b := setup(t, func(o *setupOpts) { o.now = func() time.Time { return now } })
	a, other := b.createAccount(t), b.createAccount(t)
	resp := b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "ci"})
	require.Equal(t, http.StatusCreated, resp.Status)
	var second struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	resp.JSON(t, &second)
	for i := 0; i < 3; i++ {
		require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", second.Key, nil).Status)
		require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", other.Key, nil).Status)
	}
	// Counting is in memory; the batch flush writes it (every 10 s in a process).
	require.NoError(t, b.srv.Usage().Flush(context.Background(), b.db))

	type usage struct {
		Days  int    `json:"days"`
		From  string `json:"from"`
		To    string `json:"to"`
		Total int64  `json:"total"`
		Keys  []struct {
			APIKeyID      string `json:"api_key_id"`
			KeyIdentifier string `json:"key_identifier"`
			Label         string `json:"label"`
			Requests      int64  `json:"requests"`
		} `json:"keys"`
		Daily []struct {
			Date     string `json:"date"`
			Requests int64  `json:"requests"`
		} `json:"daily"`
	}
	var u usage
	resp = b.do(t, "GET", "/api/accounts/me/usage", a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	resp.JSON(t, &u)
	require.Equal(t, 7, u.Days)
	require.Equal(t, "2026-04-14", u.From)
	require.Equal(t, "2026-04-20", u.To)
	require.Len(t, u.Daily, 7)
	require.Equal(t, "2026-04-20", u.Daily[6].Date)
	// a's default key made 1 request (POST api-keys), the "ci" key 3; the
	// other account's requests are not here.
	require.Equal(t, int64(4), u.Total)
	require.Equal(t, int64(4), u.Daily[6].Requests)
	require.Zero(t, u.Daily[0].Requests)
	require.Len(t, u.Keys, 2)
	require.Equal(t, second.ID, u.Keys[0].APIKeyID)
	require.Equal(t, "ci", u.Keys[0].Label)
	require.Equal(t, int64(3), u.Keys[0].Requests)
	require.Equal(t, a.Key[:7], u.Keys[1].KeyIdentifier)

	resp = b.do(t, "GET", "/api/accounts/me/usage?days=1", other.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	resp.JSON(t, &u)
	require.Len(t, u.Daily, 1)
	require.Equal(t, int64(3), u.Total)

	for _, q := range []string{"days=0", "days=91"} {
		require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", "/api/accounts/me/usage?"+q, a.Key, nil).Status)
	}
	require.Equal(t, http.StatusBadRequest, b.do(t, "GET", "/api/accounts/me/usage?days=x", a.Key, nil).Status)
}
