package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/identity"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

func (b *testBundle) token(t *testing.T, key string) string {
	t.Helper()
	resp := b.do(t, "POST", "/api/auth/token", key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var tok tokenResponse
	resp.JSON(t, &tok)
	return tok.AccessToken
}

func TestIssueToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)

	t.Run("APIKey", func(t *testing.T) {
		resp := b.do(t, "POST", "/api/auth/token", acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var tok tokenResponse
		resp.JSON(t, &tok)
		require.Equal(t, "Bearer", tok.TokenType)
		require.Equal(t, 900, tok.ExpiresIn)
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

		parsed, _, err := jwt.NewParser().ParseUnverified(tok.AccessToken, jwt.MapClaims{})
		require.NoError(t, err)
		claims := parsed.Claims.(jwt.MapClaims)
		require.Equal(t, acct.ID, claims["sub"])
		require.Equal(t, "authenticated", claims["role"])
		require.Equal(t, "authenticated", claims["aud"].([]any)[0])
		require.Equal(t, "mailwatch", claims["iss"])
		require.Equal(t, "ES256", parsed.Header["alg"])
		exp, iat := claims["exp"].(float64), claims["iat"].(float64)
		require.LessOrEqual(t, exp-iat, 900.0)

		// The JWKS holds the token's key.
		resp = b.do(t, "GET", "/.well-known/jwks.json", "", nil)
		require.Equal(t, http.StatusOK, resp.Status)
		var set struct {
			Keys []struct {
				KID string `json:"kid"`
				ALG string `json:"alg"`
			} `json:"keys"`
		}
		resp.JSON(t, &set)
		var kids []string
		for _, k := range set.Keys {
			kids = append(kids, k.KID)
			require.Equal(t, "ES256", k.ALG)
		}
		require.Contains(t, kids, parsed.Header["kid"])
	})
	t.Run("Password", func(t *testing.T) {
		resp := b.do(t, "POST", "/api/auth/token", "", map[string]string{"email": strings.ToUpper(acct.Email), "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var tok tokenResponse
		resp.JSON(t, &tok)
		parsed, _, err := jwt.NewParser().ParseUnverified(tok.AccessToken, jwt.MapClaims{})
		require.NoError(t, err)
		require.Equal(t, acct.Email, parsed.Claims.(jwt.MapClaims)["email"])
	})
	t.Run("Refused", func(t *testing.T) {
		for _, c := range []struct {
			key  string
			body any
		}{
			{"", map[string]string{"email": acct.Email, "password": "wrong horse battery"}},
			{"", map[string]string{"email": "nobody@example.com", "password": "correct horse battery"}},
			{"", nil},
			{"mw_" + strings.Repeat("A", 40), nil},
			{"not-a-key", nil},
		} {
			resp := b.do(t, "POST", "/api/auth/token", c.key, c.body)
			require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
			require.NotEmpty(t, resp.Detail(t))
		}
	})
	t.Run("BadBody", func(t *testing.T) {
		resp := b.do(t, "POST", "/api/auth/token", "", `{"email": 5}`)
		require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
	})
}

// TestDataAPIRefusesBadTokens: every kind of bad token is 401 with
// PostgREST's error shape.
func TestDataAPIRefusesBadTokens(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	b := setup(t, func(o *setupOpts) { o.now = clock.Now })
	acct := b.createAccount(t)
	good := b.token(t, acct.Key)
	ctx := context.Background()

	// Tokens from issuers that share our keys but not our iss or aud.
	keyring := testKeyring(t)
	otherAud, err := identity.NewIssuer(b.db, keyring, identity.Config{Audience: "other", Now: clock.Now})
	require.NoError(t, err)
	otherIss, err := identity.NewIssuer(b.db, keyring, identity.Config{Issuer: "https://evil.test", Now: clock.Now})
	require.NoError(t, err)
	accountID := mustUUID(t, acct.ID)
	wrongAud, err := otherAud.Sign(ctx, accountID, "")
	require.NoError(t, err)
	wrongIss, err := otherIss.Sign(ctx, accountID, "")
	require.NoError(t, err)

	parsed, _, err := jwt.NewParser().ParseUnverified(good, jwt.MapClaims{})
	require.NoError(t, err)
	claims := parsed.Claims.(jwt.MapClaims)
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims)
	none.Header["kid"] = parsed.Header["kid"]
	noneTok, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	jwks := b.do(t, "GET", "/.well-known/jwks.json", "", nil).Body
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	hs.Header["kid"] = parsed.Header["kid"]
	hsTok, err := hs.SignedString(jwks)
	require.NoError(t, err)
	unknown := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	unknown.Header["kid"] = "unknown-kid"
	unknownTok, err := unknown.SignedString([]byte("x"))
	require.NoError(t, err)

	resp := b.do(t, "GET", "/rest/v1/events", good, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)

	for name, tok := range map[string]string{
		"WrongAudience": wrongAud.AccessToken, "WrongIssuer": wrongIss.AccessToken, "AlgNone": noneTok,
		"HS256PublicKey": hsTok, "UnknownKID": unknownTok, "APIKey": acct.Key, "Garbage": "a.b.c",
	} {
		resp := b.do(t, "GET", "/rest/v1/events", tok, nil)
		require.Equal(t, http.StatusUnauthorized, resp.Status, "%s: %s", name, resp.Body)
		var e api.PostgRESTErrorBody
		resp.JSON(t, &e)
		require.Equal(t, "PGRST301", e.Code, name)
	}
	resp = b.do(t, "GET", "/rest/v1/events", "", nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status)

	// A retired key past its grace, and an expired token.
	_, err = dbutil.WithTxV(ctx, b.db, func(ctx context.Context, tx dbutil.Tx) (identity.RotateResult, error) {
		return identity.Rotate(ctx, tx, keyring, clock.Now(), 0, time.Hour)
	})
	require.NoError(t, err)
	clock.Add(time.Minute)
	resp = b.do(t, "GET", "/rest/v1/events", good, nil)
	require.Equal(t, http.StatusOK, resp.Status, "a retired key verifies within its grace: %s", resp.Body)
	clock.Add(15 * time.Minute)
	resp = b.do(t, "GET", "/rest/v1/events", good, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status, "expired: %s", resp.Body)
	fresh := b.token(t, acct.Key)
	clock.Add(identity.GraceFor(15*time.Minute, identity.DefaultRefresh))
	resp = b.do(t, "GET", "/rest/v1/events", good, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status, "retired key after grace: %s", resp.Body)
	_ = fresh
}

// TestTokenRotationUnderLoad: two replicas issue and verify tokens for
// each other while the keys rotate; no request is refused.
func TestTokenRotationUnderLoad(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	b1 := setup(t, func(o *setupOpts) { o.db, o.limit = pool, 1_000_000 })
	b2 := setup(t, func(o *setupOpts) {
		o.db, o.limit = pool, 1_000_000
		o.deps = func(d *api.Deps) {
			is, err := identity.NewIssuer(pool, d.Keyring, identity.Config{Refresh: 50 * time.Millisecond})
			require.NoError(t, err)
			d.Identity = is
		}
	})
	acct := b1.createAccount(t)
	servers := []*testBundle{b1, b2}
	addrs := make([]string, 2)
	for i, b := range servers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = b.srv.Serve(ln) }()
		t.Cleanup(func() { _ = b.srv.Shutdown(context.Background()) })
		addrs[i] = "http://" + ln.Addr().String()
	}
	keyring := testKeyring(t)
	stop := make(chan struct{})
	var rotations atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			_, err := dbutil.WithTxV(context.Background(), pool, func(ctx context.Context, tx dbutil.Tx) (identity.RotateResult, error) {
				return identity.Rotate(ctx, tx, keyring, time.Now(), 0, time.Hour)
			})
			if err != nil {
				t.Logf("rotation: %v", err)
				continue
			}
			rotations.Add(1)
		}
	}()
	client := &http.Client{}
	call := func(method, url, auth string) (int, []byte, error) {
		req, _ := http.NewRequest(method, url, nil)
		req.Header.Set("Authorization", "Bearer "+auth)
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var buf [4096]byte
		n, _ := resp.Body.Read(buf[:])
		return resp.StatusCode, buf[:n], nil
	}
	var (
		wg       sync.WaitGroup
		failures atomic.Int64
		requests atomic.Int64
		firstErr sync.Once
		errText  string
	)
	deadline := time.Now().Add(2500 * time.Millisecond)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) || rotations.Load() < 3 {
				issuer, reader := addrs[g%2], addrs[(g+1)%2]
				st, body, err := call("POST", issuer+"/api/auth/token", acct.Key)
				var tok tokenResponse
				if err == nil && st == 200 {
					err = json.Unmarshal(body, &tok)
				}
				if err == nil && st == 200 {
					st, body, err = call("GET", reader+"/rest/v1/events?limit=1", tok.AccessToken)
				}
				requests.Add(1)
				if err != nil || st != 200 {
					failures.Add(1)
					firstErr.Do(func() { errText = fmt.Sprintf("%d %v %s", st, err, body) })
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	require.GreaterOrEqual(t, rotations.Load(), int64(3))
	require.Zero(t, failures.Load(), "of %d requests; first: %s", requests.Load(), errText)
}

// testClock is a settable time source.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// testKeyring is the keyring setup gives every server.
func testKeyring(t *testing.T) *secretbox.Keyring {
	t.Helper()
	kr, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	return kr
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}
