package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
)

// TestDataAPIBudgetIsTheAccounts: the data API's request budget belongs to
// the account a token resolves to, not to the token's own subject: an
// email-linked user presenting tokens with ever new `sub` values, and the
// account's own mailwatch token, all draw on one budget and get 429 once it
// is spent.
func TestDataAPIBudgetIsTheAccounts(t *testing.T) {
	t.Parallel()
	const budget = 6
	// An hour-long window that starts at the first request: no window
	// boundary can fall inside the test and refill the budget.
	lim := limiter.New(memory.NewStore(), limiter.Rate{Period: time.Hour, Limit: budget})
	b := setup(t, func(o *setupOpts) { o.lim = lim })
	acct := b.createAccount(t)
	other := b.createAccount(t)
	idp := newTestIdP(t)
	pid := b.createAuthProvider(t, acct.Key, "oidc", idp, "")["id"].(string)
	resp := b.do(t, "POST", "/api/accounts/me/auth-providers/"+pid+"/links", acct.Key, map[string]any{"email": "linked@example.com"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)

	read := func(token string) response {
		t.Helper()
		return b.dataAPI(t, "/rest/v1/events?select=id&limit=1", token, acct.ID)
	}
	for i := range budget {
		// A fresh subject for each request, all linked by the same email.
		resp := read(idp.token(t, "sub-"+string(rune('a'+i)), "linked@example.com", "app"))
		require.Equal(t, http.StatusOK, resp.Status, "request %d: %s", i+1, resp.Body)
	}
	resp = read(idp.token(t, "sub-fresh", "linked@example.com", "app"))
	require.Equal(t, http.StatusTooManyRequests, resp.Status, "a new sub is not a new budget: %s", resp.Body)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	var pgrst map[string]any
	resp.JSON(t, &pgrst)
	require.Contains(t, pgrst["message"], "rate limit")

	// The account's own token draws on the same budget...
	tok := b.do(t, "POST", "/api/auth/token", acct.Key, nil)
	require.Equal(t, http.StatusOK, tok.Status, "%s", tok.Body)
	var issued struct {
		AccessToken string `json:"access_token"`
	}
	tok.JSON(t, &issued)
	require.Equal(t, http.StatusTooManyRequests, read(issued.AccessToken).Status)
	// ...and another account's does not.
	tok = b.do(t, "POST", "/api/auth/token", other.Key, nil)
	require.Equal(t, http.StatusOK, tok.Status, "%s", tok.Body)
	tok.JSON(t, &issued)
	require.Equal(t, http.StatusOK, read(issued.AccessToken).Status)
}
