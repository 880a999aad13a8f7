package authproviders_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/authproviders"
	"github.com/mailwatch/mailwatch/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// testIdP signs tokens with one ES256 key and serves its public JWK Set.
type testIdP struct {
	key  *ecdsa.PrivateKey
	kid  string
	iss  string
	jwks []byte
}

func newTestIdP(t *testing.T, iss string) *testIdP {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p := &testIdP{key: key, kid: "k1", iss: iss}
	jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.AlgES256, KID: p.kid, USE: jwkset.UseSig}})
	require.NoError(t, err)
	st := jwkset.NewMemoryStorage()
	require.NoError(t, st.KeyWrite(context.Background(), jwk))
	p.jwks, err = st.JSONPublic(context.Background())
	require.NoError(t, err)
	return p
}

func (p *testIdP) token(t *testing.T, sub string, iat time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": p.iss, "sub": sub, "aud": "app", "iat": iat.Unix(), "exp": time.Now().Add(5 * time.Minute).Unix(),
	})
	tok.Header["kid"] = p.kid
	s, err := tok.SignedString(p.key)
	require.NoError(t, err)
	return s
}

// seedAccount makes an account whose provider of p's issuer reads jwksURL
// and links subject sub.
func seedAccount(t *testing.T, db *pgxpool.Pool, p *testIdP, jwksURL, sub string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	acct, prov := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	_, err := db.Exec(ctx, `INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')`, acct, acct.String()+"@example.com")
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO auth_providers (id, account_id, kind, issuer, jwks_url, audience) VALUES ($1, $2, 'oidc', $3, $4, 'app')`,
		prov, acct, p.iss, jwksURL)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO auth_provider_links (id, provider_id, account_id, subject) VALUES ($1, $2, $3, $4)`,
		uuid.Must(uuid.NewV7()), prov, acct, sub)
	require.NoError(t, err)
	return acct
}

func serveJWKS(t *testing.T, p *testIdP, fetches *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fetches != nil {
			fetches.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(p.jwks)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// roundTrips records, per host, whether a round trip has returned.
type roundTrips struct {
	inner    http.RoundTripper
	returned sync.Map // host -> struct{}
}

func (r *roundTrips) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.inner.RoundTrip(req)
	r.returned.Store(req.URL.Host, struct{}{})
	return resp, err
}

func (r *roundTrips) hasReturned(rawURL string) bool {
	u, _ := url.Parse(rawURL)
	_, ok := r.returned.Load(u.Host)
	return ok
}

// TestJWKSFetchDoesNotStallOtherTenants: tenant A's JWKS server accepts
// the request and never answers until the test releases it; tenant B's
// token is verified while A's fetch is still in its first round trip and
// A's verification still waits. When released, A's verification completes
// from that same fetch.
func TestJWKSFetchDoesNotStallOtherTenants(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.NewDB(t)
	a, b := newTestIdP(t, "https://a.example/"), newTestIdP(t, "https://b.example/")
	entered, release := make(chan struct{}), make(chan struct{})
	var aRequests atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if aRequests.Add(1) == 1 {
			close(entered)
		}
		select {
		case <-release:
			_, _ = w.Write(a.jwks)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	acctA := seedAccount(t, db, a, slow.URL, "user-a")
	acctB := seedAccount(t, db, b, serveJWKS(t, b, nil).URL, "user-b")
	rt := &roundTrips{inner: http.DefaultTransport.(*http.Transport).Clone()}
	// FetchTimeout is far beyond the test's life, so that only the states
	// below decide.
	v := &authproviders.Verifier{DB: db, Client: &http.Client{Transport: rt}, FetchTimeout: time.Hour}
	t.Cleanup(v.Close)

	type result struct {
		got *authproviders.Verified
		err error
	}
	aDone := make(chan result, 2)
	tokA := a.token(t, "user-a", time.Now())
	for range 2 { // two requests of A: one fetch
		go func() {
			got, _, err := v.Verify(context.Background(), tokA, "", acctA.String())
			aDone <- result{got, err}
		}()
	}
	<-entered

	got, handled, err := v.Verify(context.Background(), b.token(t, "user-b", time.Now()), "", acctB.String())
	require.NoError(t, err)
	require.True(t, handled)
	require.Equal(t, acctB.String(), got.AccountID)
	require.False(t, rt.hasReturned(slow.URL), "B was verified only after A's JWKS fetch ended")
	select {
	case r := <-aDone:
		t.Fatalf("A's verification returned before its JWKS was served: %+v", r)
	default:
	}

	releaseOnce.Do(func() { close(release) })
	for range 2 {
		r := <-aDone
		require.NoError(t, r.err)
		require.Equal(t, acctA.String(), r.got.AccountID)
	}
	require.Equal(t, int64(1), aRequests.Load(), "one fetch in flight per set")
}

// TestJWKSWaitEndsWithTheRequest: a request waiting for a tarpitting JWKS
// returns when its context ends, and the fetch nobody waits for any more
// is cancelled (the server sees its client go).
func TestJWKSWaitEndsWithTheRequest(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.NewDB(t)
	a := newTestIdP(t, "https://a.example/")
	entered, gone := make(chan struct{}), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		close(gone)
	}))
	t.Cleanup(slow.Close)
	acct := seedAccount(t, db, a, slow.URL, "user-a")
	v := &authproviders.Verifier{DB: db, Client: &http.Client{}, FetchTimeout: time.Hour}
	t.Cleanup(v.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := v.Verify(ctx, a.token(t, "user-a", time.Now()), "", acct.String())
		done <- err
	}()
	<-entered
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	<-gone
}

// TestJWKSBodyCapped: a JWK Set over authproviders.MaxJWKSBytes is refused
// without reading it all (a streamed body of 64 MiB: the server's writes
// fail once the client stops reading), and so, before its body, is one
// whose Content-Length says it is too large.
func TestJWKSBodyCapped(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.NewDB(t)
	a := newTestIdP(t, "https://a.example/")
	const total = 64 << 20
	finished := make(chan bool, 1)
	stream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		complete := false
		defer func() { finished <- complete }()
		chunk := []byte(strings.Repeat("x", 32<<10))
		if _, err := w.Write([]byte(`{"keys":[],"pad":"`)); err != nil {
			return
		}
		for n := 0; n < total; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, err := w.Write([]byte(`"}`))
		complete = err == nil
	}))
	t.Cleanup(stream.Close)
	declared := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(authproviders.MaxJWKSBytes+1))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the body never comes
	}))
	t.Cleanup(declared.Close)
	v := &authproviders.Verifier{DB: db, Client: &http.Client{}, FetchTimeout: time.Hour}
	t.Cleanup(v.Close)

	acct := seedAccount(t, db, a, stream.URL, "user-a")
	_, _, err := v.Verify(context.Background(), a.token(t, "user-a", time.Now()), "", acct.String())
	require.ErrorIs(t, err, authproviders.ErrJWKSTooLarge)
	require.False(t, <-finished, "the whole body was read")

	acct = seedAccount(t, db, a, declared.URL, "user-a")
	_, _, err = v.Verify(context.Background(), a.token(t, "user-a", time.Now()), "", acct.String())
	require.ErrorIs(t, err, authproviders.ErrJWKSTooLarge)
}

// TestProviderTokenIssuedInTheFuture: iat may be ahead of our clock by at
// most authproviders.ClockSkew.
func TestProviderTokenIssuedInTheFuture(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.NewDB(t)
	a := newTestIdP(t, "https://a.example/")
	acct := seedAccount(t, db, a, serveJWKS(t, a, nil).URL, "user-a")
	v := &authproviders.Verifier{DB: db, Client: &http.Client{}}
	t.Cleanup(v.Close)
	_, _, err := v.Verify(context.Background(), a.token(t, "user-a", time.Now().Add(time.Hour)), "", acct.String())
	require.ErrorIs(t, err, jwt.ErrTokenUsedBeforeIssued, "a token issued an hour from now")
	_, _, err = v.Verify(context.Background(), a.token(t, "user-a", time.Now().Add(authproviders.ClockSkew+time.Minute)), "", acct.String())
	require.ErrorIs(t, err, jwt.ErrTokenUsedBeforeIssued)
	got, _, err := v.Verify(context.Background(), a.token(t, "user-a", time.Now().Add(authproviders.ClockSkew/3)), "", acct.String())
	require.NoError(t, err, "within the clock skew")
	require.Equal(t, acct.String(), got.AccountID)
}

// TestJWKSCacheBounds: cached sets are served without a fetch; an
// account's sets beyond authproviders.MaxPerAccount, and the process's
// beyond MaxSets, evict the least recently used.
func TestJWKSCacheBounds(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.NewDB(t)
	a := newTestIdP(t, "https://a.example/")
	var fetches atomic.Int64
	srv := serveJWKS(t, a, &fetches)
	v := &authproviders.Verifier{DB: db, Client: &http.Client{}, MaxSets: authproviders.MaxPerAccount + 2}
	t.Cleanup(v.Close)
	ctx := context.Background()
	setURL := func(acct uuid.UUID, n int) {
		_, err := db.Exec(ctx, `UPDATE auth_providers SET jwks_url = $2 WHERE account_id = $1`, acct, srv.URL+"/jwks/"+strconv.Itoa(n))
		require.NoError(t, err)
	}
	verify := func(acct uuid.UUID) {
		t.Helper()
		_, _, err := v.Verify(ctx, a.token(t, "user-a", time.Now()), "", acct.String())
		require.NoError(t, err)
	}
	one := seedAccount(t, db, a, srv.URL, "user-a")
	setURL(one, 0)
	verify(one)
	verify(one)
	require.Equal(t, int64(1), fetches.Load(), "the cached set serves")

	// The account's sets past MaxPerAccount: set 0 is evicted.
	for n := 1; n <= authproviders.MaxPerAccount; n++ {
		setURL(one, n)
		verify(one)
	}
	require.Equal(t, int64(1+authproviders.MaxPerAccount), fetches.Load())
	setURL(one, 0)
	verify(one)
	require.Equal(t, int64(2+authproviders.MaxPerAccount), fetches.Load(), "set 0 was evicted by the account's bound")

	// Another account's sets past MaxSets evict the least recently used.
	two := seedAccount(t, db, a, srv.URL, "user-a")
	setURL(two, 100)
	verify(two)
	setURL(two, 101)
	verify(two)
	setURL(two, 102)
	verify(two)
	before := fetches.Load()
	setURL(two, 100)
	verify(two)
	require.Equal(t, before, fetches.Load(), "the other account's recent set is still cached")
	setURL(one, 2) // the least recently used when 102 came
	verify(one)
	require.Equal(t, before+1, fetches.Load(), "the process's bound evicted it")
}
