// Package authproviders lets an account trust external identity providers
// (Supabase, Clerk, Auth0, WorkOS, generic OIDC): their JWTs, verified with
// the provider's JWK Set, read the data API for the account once the
// external user is linked; their user webhooks (Standard Webhooks, Svix's
// header names, WorkOS's signature) create, update and remove links.
package authproviders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Kinds of provider.
var Kinds = []string{"supabase", "clerk", "auth0", "workos", "oidc"}

// Algorithms accepted from providers (asymmetric only: a JWKS is public).
var Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"}

// ErrNoLink is a valid provider token whose user no link binds.
var ErrNoLink = errors.New("the token's user is not linked to an account")

// ErrUnavailable wraps a failure to read the providers or links: the
// token was not judged, so the caller answers 503, not 401.
var ErrUnavailable = errors.New("identity provider lookup unavailable")

// Verifier checks provider tokens. One per process; it caches each JWKS.
type Verifier struct {
	DB dbutil.Executor
	// Client fetches JWK Sets; it must be the SSRF-guarded client.
	Client *http.Client
	// RefreshEvery refreshes each cached JWKS; 1h when zero.
	RefreshEvery time.Duration
	// UnknownKIDEvery limits refreshes on an unknown kid per JWKS URL; 1m
	// when zero.
	UnknownKIDEvery time.Duration

	mu   sync.Mutex
	sets map[string]keyfunc.Keyfunc
	ctx  context.Context
	stop context.CancelFunc
}

// Close stops the JWKS refresh goroutines.
func (v *Verifier) Close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stop != nil {
		v.stop()
	}
}

const maxCachedSets = 1000

func (v *Verifier) keyfunc(url string) (keyfunc.Keyfunc, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sets == nil {
		v.sets = map[string]keyfunc.Keyfunc{}
		v.ctx, v.stop = context.WithCancel(context.Background())
	}
	if kf, ok := v.sets[url]; ok {
		return kf, nil
	}
	if len(v.sets) >= maxCachedSets {
		v.stop()
		v.sets = map[string]keyfunc.Keyfunc{}
		v.ctx, v.stop = context.WithCancel(context.Background())
	}
	refresh, unknown := v.RefreshEvery, v.UnknownKIDEvery
	if refresh <= 0 {
		refresh = time.Hour
	}
	if unknown <= 0 {
		unknown = time.Minute
	}
	kf, err := keyfunc.NewDefaultOverrideCtx(v.ctx, []string{url}, keyfunc.Override{
		Client:            v.Client,
		HTTPTimeout:       10 * time.Second,
		RefreshInterval:   refresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(unknown), 1),
		RateLimitWaitMax:  time.Second,
		// Errors are the provider's; a refused token says so.
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) { return func(context.Context, error) {} },
	})
	if err != nil {
		return nil, fmt.Errorf("error preparing JWKS %s: %w", url, err)
	}
	v.sets[url] = kf
	return kf, nil
}

// Verified is an accepted provider token.
type Verified struct {
	AccountID string
	// Claims are set as request.jwt.claims: sub is the linked account, the
	// provider's own identity is kept beside it.
	Claims  []byte
	RateKey string
}

// Verify accepts token when its issuer is a configured provider's; handled
// is false when no provider has that issuer (the caller tries its own), and
// at once, without a query, for tokens of issuer skip (mailwatch's own).
func (v *Verifier) Verify(ctx context.Context, token, skip string) (*Verified, bool, error) {
	unverified, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return nil, false, nil
	}
	mc := unverified.Claims.(jwt.MapClaims)
	iss, _ := mc["iss"].(string)
	if iss == "" || iss == skip {
		return nil, false, nil
	}
	claims, err := json.Marshal(mc)
	if err != nil {
		return nil, false, nil
	}
	q := dbsqlc.New()
	providers, err := q.AuthProviderListByIssuer(ctx, v.DB, dbsqlc.AuthProviderListByIssuerParams{Issuer: iss, Claims: claims})
	if err != nil {
		return nil, true, fmt.Errorf("%w: error listing the providers of %s: %w", ErrUnavailable, iss, err)
	}
	if len(providers) == 0 {
		return nil, false, nil
	}
	var lastErr error = ErrNoLink
	for _, p := range providers {
		acct, claims, err := v.verifyWith(ctx, p, token)
		if err != nil {
			if !errors.Is(lastErr, ErrUnavailable) {
				lastErr = err // an unavailable lookup is reported over a refusal
			}
			continue
		}
		return &Verified{AccountID: acct, Claims: claims, RateKey: "provider:" + p.ID.String() + ":" + claimsSubject(claims)}, true, nil
	}
	return nil, true, lastErr
}

func claimsSubject(raw []byte) string {
	var c struct {
		Sub string `json:"provider_sub"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Sub
}

func (v *Verifier) verifyWith(ctx context.Context, p dbsqlc.AuthProvider, token string) (string, []byte, error) {
	kf, err := v.keyfunc(p.JwksUrl)
	if err != nil {
		return "", nil, err
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(Algorithms), jwt.WithIssuer(p.Issuer), jwt.WithExpirationRequired(), jwt.WithLeeway(30 * time.Second),
	}
	if p.Audience != nil && *p.Audience != "" {
		opts = append(opts, jwt.WithAudience(*p.Audience))
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		if kid, _ := t.Header["kid"].(string); kid == "" {
			return nil, errors.New("token has no kid")
		}
		return kf.KeyfuncCtx(ctx)(t)
	}); err != nil {
		return "", nil, err
	}
	subject, _ := claims[p.SubjectClaim].(string)
	email, _ := claims[p.EmailClaim].(string)
	email = strings.ToLower(strings.TrimSpace(email))
	if v, ok := claims["email_verified"].(bool); ok && !v {
		email = "" // an unverified address proves nothing: link by subject only
	}
	if subject == "" && email == "" {
		return "", nil, fmt.Errorf("token has neither %s nor %s", p.SubjectClaim, p.EmailClaim)
	}
	row, err := dbsqlc.New().AuthProviderLinkFind(ctx, v.DB, dbsqlc.AuthProviderLinkFindParams{
		ProviderID: p.ID, Subject: nonEmpty(subject), Email: nonEmpty(email),
	})
	if dbutil.IsNotFound(err) {
		return "", nil, ErrNoLink
	}
	if err != nil {
		return "", nil, fmt.Errorf("%w: error finding the link: %w", ErrUnavailable, err)
	}
	out, err := json.Marshal(map[string]any{
		"sub": row.String(), "role": "authenticated", "iss": p.Issuer, "aud": claims["aud"], "exp": claims["exp"],
		"provider_id": p.ID.String(), "provider_sub": subject, "email": email,
	})
	if err != nil {
		return "", nil, err
	}
	return row.String(), out, nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
