package api_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// testIdP is an identity provider on loopback: a JWKS endpoint and a key
// that signs its users' tokens.
type testIdP struct {
	srv     *httptest.Server
	key     *ecdsa.PrivateKey
	kid     string
	issuer  string
	fetches atomic.Int64
}

func newTestIdP(t *testing.T) *testIdP {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	idp := &testIdP{key: key, kid: "idp-key-1"}
	jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.AlgES256, KID: idp.kid, USE: jwkset.UseSig}})
	require.NoError(t, err)
	store := jwkset.NewMemoryStorage()
	require.NoError(t, store.KeyWrite(context.Background(), jwk))
	body, err := store.JSONPublic(context.Background())
	require.NoError(t, err)
	idp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idp.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(idp.srv.Close)
	idp.issuer = idp.srv.URL + "/"
	return idp
}

func (p *testIdP) token(t *testing.T, sub, email, aud string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": p.issuer, "sub": sub, "email": email, "aud": aud,
		"iat": time.Now().Unix(), "exp": time.Now().Add(5 * time.Minute).Unix(),
	})
	tok.Header["kid"] = p.kid
	s, err := tok.SignedString(p.key)
	require.NoError(t, err)
	return s
}

const testProviderSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func (b *testBundle) createAuthProvider(t *testing.T, key, kind string, idp *testIdP, secret string) map[string]any {
	t.Helper()
	body := map[string]any{"kind": kind, "issuer": idp.issuer, "jwks_url": idp.srv.URL + "/.well-known/jwks.json", "audience": "app"}
	if secret != "" {
		body["webhook_secret"] = secret
	}
	resp := b.do(t, "POST", "/api/accounts/me/auth-providers", key, body)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var out map[string]any
	resp.JSON(t, &out)
	return out
}

// signedAuthEvent signs body with Standard Webhooks under prefix's header
// names ("webhook-" or "svix-").
func signedAuthEvent(t *testing.T, providerID, prefix, msgID string, body []byte) *http.Request {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(testProviderSecret)
	require.NoError(t, err)
	now := time.Now()
	sig, err := wh.Sign(msgID, now, body)
	require.NoError(t, err)
	req := httptest.NewRequest("POST", "/api/webhooks/auth/"+providerID, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(prefix+"id", msgID)
	req.Header.Set(prefix+"timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(prefix+"signature", sig)
	return req
}

func TestAuthProviderCRUD(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct, other := b.createAccount(t), b.createAccount(t)
	idp := newTestIdP(t)
	p := b.createAuthProvider(t, acct.Key, "oidc", idp, testProviderSecret)
	id := p["id"].(string)
	require.Equal(t, true, p["has_webhook_secret"])
	require.NotContains(t, p, "webhook_secret")
	require.Equal(t, "sub", p["subject_claim"])

	resp := b.do(t, "POST", "/api/accounts/me/auth-providers", acct.Key, map[string]any{"kind": "oidc", "issuer": idp.issuer, "jwks_url": idp.srv.URL, "audience": "app"})
	require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
	// A shared issuer without a pinned audience would accept tokens minted for
	// other applications: refused on create and on update.
	for _, kind := range []string{"oidc", "auth0", "workos"} {
		resp = b.do(t, "POST", "/api/accounts/me/auth-providers", acct.Key, map[string]any{"kind": kind, "issuer": "https://shared.example/" + kind, "jwks_url": idp.srv.URL})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s: %s", kind, resp.Body)
		require.Contains(t, string(resp.Body), "audience")
	}
	resp = b.do(t, "PATCH", "/api/accounts/me/auth-providers/"+id, acct.Key, map[string]any{"audience": nil})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	resp = b.do(t, "POST", "/api/accounts/me/auth-providers", acct.Key, map[string]any{"kind": "okta", "issuer": "x", "jwks_url": idp.srv.URL})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	resp = b.do(t, "POST", "/api/accounts/me/auth-providers", acct.Key, map[string]any{"kind": "oidc", "issuer": "y", "jwks_url": "ftp://x"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)

	resp = b.do(t, "PATCH", "/api/accounts/me/auth-providers/"+id, acct.Key, map[string]any{"name": "staging", "audience": "app2"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &p)
	require.Equal(t, "staging", p["name"])
	require.Equal(t, "app2", p["audience"])

	resp = b.do(t, "GET", "/api/accounts/me/auth-providers", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var list []map[string]any
	resp.JSON(t, &list)
	require.Len(t, list, 1)

	// Another account's provider is 404 everywhere.
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/accounts/me/auth-providers/" + id}, {"DELETE", "/api/accounts/me/auth-providers/" + id},
		{"GET", "/api/accounts/me/auth-providers/" + id + "/links"},
	} {
		require.Equal(t, http.StatusNotFound, b.do(t, c.method, c.path, other.Key, nil).Status)
	}
	resp = b.do(t, "POST", "/api/accounts/me/auth-providers/"+id+"/links", other.Key, map[string]any{"subject": "u1"})
	require.Equal(t, http.StatusNotFound, resp.Status)

	resp = b.do(t, "POST", "/api/accounts/me/auth-providers/"+id+"/links", acct.Key, map[string]any{"subject": "u1", "email": "U1@Example.com"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var link map[string]any
	resp.JSON(t, &link)
	require.Equal(t, "u1@example.com", link["email"])
	resp = b.do(t, "POST", "/api/accounts/me/auth-providers/"+id+"/links", acct.Key, map[string]any{"subject": "u1"})
	require.Equal(t, http.StatusConflict, resp.Status)
	resp = b.do(t, "POST", "/api/accounts/me/auth-providers/"+id+"/links", acct.Key, map[string]any{})
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", "/api/accounts/me/auth-providers/"+id+"/links/"+link["id"].(string), acct.Key, nil).Status)
	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", "/api/accounts/me/auth-providers/"+id, acct.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/api/accounts/me/auth-providers/"+id, acct.Key, nil).Status)
}

// TestAuthProviderWebhooksLinkUsers: Clerk-style (Svix headers) and
// Supabase-style (Standard Webhooks) user events create links, and the
// linked users' provider tokens then read the account's rows.
func TestAuthProviderWebhooksLinkUsers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct, other := b.createAccount(t), b.createAccount(t)
	ctx := context.Background()
	for _, owner := range []string{acct.ID, other.ID} {
		_, err := b.db.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, payload, rendered)
			VALUES ($1, $2, 'bounce_spike', 'info', '{}', '{}')`, uuid.Must(uuid.NewV7()), owner)
		require.NoError(t, err)
	}
	clerk, supa := newTestIdP(t), newTestIdP(t)
	clerkID := b.createAuthProvider(t, acct.Key, "clerk", clerk, testProviderSecret)["id"].(string)
	supaID := b.createAuthProvider(t, acct.Key, "supabase", supa, testProviderSecret)["id"].(string)

	clerkToken := clerk.token(t, "user_2abc", "", "app")
	resp := b.dataAPI(t, "/rest/v1/events", clerkToken, acct.ID)
	require.Equal(t, http.StatusUnauthorized, resp.Status, "not linked yet: %s", resp.Body)

	// Clerk: Svix header names; the svix-id is stable across retries.
	clerkEvent := []byte(`{"object":"event","type":"user.created","data":{"id":"user_2abc","primary_email_address_id":"idn_1",` +
		`"email_addresses":[{"id":"idn_0","email_address":"old@example.com"},{"id":"idn_1","email_address":"Ann@Example.com"}]}}`)
	req := signedAuthEvent(t, clerkID, "svix-", "msg_clerk_1", clerkEvent)
	resp = b.rcvRawDo(t, req)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.JSONEq(t, `{"type":"user.created","applied":true,"duplicate":false}`, string(resp.Body))
	resp = b.rcvRawDo(t, signedAuthEvent(t, clerkID, "svix-", "msg_clerk_1", clerkEvent))
	require.JSONEq(t, `{"type":"user.created","applied":false,"duplicate":true}`, string(resp.Body))

	resp = b.dataAPI(t, "/rest/v1/events?select=account_id", clerkToken, acct.ID)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.JSONEq(t, fmt.Sprintf(`[{"account_id":%q}]`, acct.ID), string(resp.Body))

	// Supabase: a database webhook on auth.users, Standard Webhooks headers;
	// a retry carries a new webhook-id but is still applied once.
	supaEvent := []byte(`{"type":"INSERT","table":"users","schema":"auth","record":{"id":"8d0c2b1e-1111-4222-8333-944455556666",` +
		`"email":"bo@example.com","updated_at":"2026-11-24T05:00:00Z"},"old_record":null}`)
	resp = b.rcvRawDo(t, signedAuthEvent(t, supaID, "webhook-", "msg_a", supaEvent))
	require.JSONEq(t, `{"type":"user.created","applied":true,"duplicate":false}`, string(resp.Body))
	resp = b.rcvRawDo(t, signedAuthEvent(t, supaID, "webhook-", "msg_b", supaEvent))
	require.JSONEq(t, `{"type":"user.created","applied":false,"duplicate":true}`, string(resp.Body))
	supaToken := supa.token(t, "8d0c2b1e-1111-4222-8333-944455556666", "bo@example.com", "app")
	resp = b.dataAPI(t, "/rest/v1/events?select=account_id", supaToken, acct.ID)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.JSONEq(t, fmt.Sprintf(`[{"account_id":%q}]`, acct.ID), string(resp.Body))

	// Wrong audience, or a token signed by another key, is refused.
	require.Equal(t, http.StatusUnauthorized, b.dataAPI(t, "/rest/v1/events", clerk.token(t, "user_2abc", "", "other-app"), acct.ID).Status)
	impostor := newTestIdP(t)
	impostor.issuer, impostor.kid = clerk.issuer, clerk.kid
	require.Equal(t, http.StatusUnauthorized, b.dataAPI(t, "/rest/v1/events", impostor.token(t, "user_2abc", "", "app"), acct.ID).Status)

	// A bad signature is 401 and changes nothing.
	bad := signedAuthEvent(t, clerkID, "svix-", "msg_clerk_2", []byte(`{"type":"user.deleted","data":{"id":"user_2abc"}}`))
	bad.Header.Set("svix-signature", "v1,AAAA")
	require.Equal(t, http.StatusUnauthorized, b.rcvRawDo(t, bad).Status)

	// user.deleted removes the link: the token reads nothing more.
	resp = b.rcvRawDo(t, signedAuthEvent(t, clerkID, "svix-", "msg_clerk_3", []byte(`{"type":"user.deleted","data":{"id":"user_2abc","deleted":true}}`)))
	require.JSONEq(t, `{"type":"user.deleted","applied":true,"duplicate":false}`, string(resp.Body))
	require.Equal(t, http.StatusUnauthorized, b.dataAPI(t, "/rest/v1/events", clerkToken, acct.ID).Status)
	require.LessOrEqual(t, clerk.fetches.Load(), int64(3), "the JWKS is cached")
}

func TestAuthProviderWorkOSWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	idp := newTestIdP(t)
	const secret = "workos-webhook-secret"
	id := b.createAuthProvider(t, acct.Key, "workos", idp, secret)["id"].(string)
	body := []byte(`{"id":"event_01HX","event":"user.created","data":{"id":"user_01HX","email":"w@example.com"}}`)
	sign := func(at time.Time, secret string) *http.Request {
		ts := strconv.FormatInt(at.UnixMilli(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		req := httptest.NewRequest("POST", "/api/webhooks/auth/"+id, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("WorkOS-Signature", "t="+ts+", v1="+hex.EncodeToString(mac.Sum(nil)))
		return req
	}
	require.Equal(t, http.StatusUnauthorized, b.rcvRawDo(t, sign(time.Now(), "wrong")).Status)
	require.Equal(t, http.StatusUnauthorized, b.rcvRawDo(t, sign(time.Now().Add(-10*time.Minute), secret)).Status)
	resp := b.rcvRawDo(t, sign(time.Now(), secret))
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.JSONEq(t, `{"type":"user.created","applied":true,"duplicate":false}`, string(resp.Body))

	resp = b.do(t, "GET", "/api/accounts/me/auth-providers/"+id+"/links", acct.Key, nil)
	var links []map[string]any
	resp.JSON(t, &links)
	require.Len(t, links, 1)
	require.Equal(t, "user_01HX", links[0]["subject"])

	// A verified event with no id to deduplicate by is the sender's
	// mistake (422), never a 500.
	body = []byte(`{"event":"user.created","data":{"id":"user_02HX","email":"x@example.com"}}`)
	resp = b.rcvRawDo(t, sign(time.Now(), secret))
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Equal(t, "webhook", links[0]["source"])

	// Unknown provider: 404.
	req := sign(time.Now(), secret)
	req.URL.Path = "/api/webhooks/auth/" + uuid.NewString()
	req.RequestURI = req.URL.Path
	require.Equal(t, http.StatusNotFound, b.rcvRawDo(t, req).Status)
}

// TestAuthProviderLinkFindByEmail pins the lookup rule: a token's email
// reaches only a link made by email; a link pinned to a subject is reached
// by that subject alone, never by another user of the provider who has the
// same email address.
func TestAuthProviderLinkFindByEmail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	idp := newTestIdP(t)
	pid := b.createAuthProvider(t, acct.Key, "oidc", idp, "")["id"].(string)
	for _, body := range []map[string]any{
		{"subject": "u1", "email": "pinned@example.com"},
		{"email": "open@example.com"},
	} {
		resp := b.do(t, "POST", "/api/accounts/me/auth-providers/"+pid+"/links", acct.Key, body)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	ctx := context.Background()
	find := func(subject, email string) (uuid.UUID, error) {
		return dbsqlc.New().AuthProviderLinkFind(ctx, b.db, dbsqlc.AuthProviderLinkFindParams{
			ProviderID: uuid.MustParse(pid), Subject: &subject, Email: &email,
		})
	}
	got, err := find("u1", "other@example.com")
	require.NoError(t, err)
	require.Equal(t, acct.ID, got.String(), "the pinned subject finds its link")
	_, err = find("u2", "pinned@example.com")
	require.True(t, dbutil.IsNotFound(err), "another subject with the pinned link's email must not match: %v", err)
	got, err = find("u3", "open@example.com")
	require.NoError(t, err)
	require.Equal(t, acct.ID, got.String(), "a link made by email matches on email")
}

// TestAuthProviderIssuerNotCrowdedOut: other accounts' providers of the
// same issuer (21 of them, created first, so lower ids) play no part in
// judging a token for the account its request names.
func TestAuthProviderIssuerNotCrowdedOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	idp := newTestIdP(t)
	for i := 0; i < 21; i++ {
		acct := uuid.Must(uuid.NewV7())
		_, err := b.db.Exec(ctx, `INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')`, acct, acct.String()+"@example.com")
		require.NoError(t, err)
		_, err = b.db.Exec(ctx, `INSERT INTO auth_providers (id, account_id, kind, issuer, jwks_url, audience)
			VALUES ($1, $2, 'oidc', $3, $4, 'app')`, uuid.Must(uuid.NewV7()), acct, idp.issuer, idp.srv.URL+"/.well-known/jwks.json")
		require.NoError(t, err)
	}
	victim := b.createAccount(t)
	pid := b.createAuthProvider(t, victim.Key, "oidc", idp, "")["id"].(string)
	resp := b.do(t, "POST", "/api/accounts/me/auth-providers/"+pid+"/links", victim.Key, map[string]any{"subject": "user-v"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	_, err := b.db.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, payload, rendered)
		VALUES ($1, $2, 'bounce_spike', 'info', '{}', '{}')`, uuid.Must(uuid.NewV7()), victim.ID)
	require.NoError(t, err)
	resp = b.dataAPI(t, "/rest/v1/events?select=account_id", idp.token(t, "user-v", "", "app"), victim.ID)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.JSONEq(t, fmt.Sprintf(`[{"account_id":%q}]`, victim.ID), string(resp.Body))
}
