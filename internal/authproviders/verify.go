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

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

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

// AccountHeader names, on a data-API request, the account a provider
// token is for. A token is judged only by that account's provider of its
// issuer and that provider's links: the token of another account's
// identity provider, or of a user only another account linked, is refused
// whatever other accounts registered the same issuer, keys and users, and
// in whatever order. A token never selects an account by itself.
const AccountHeader = "X-Mailwatch-Account"

// ErrAccountNotNamed is a provider token on a request that does not name
// its account (AccountHeader), or names it with something else than an
// account id.
var ErrAccountNotNamed = errors.New("a token of an external identity provider must name the account it is for: send " +
	AccountHeader + ": <account id>")

// ErrNoProvider is a token whose issuer the named account has not
// configured.
var ErrNoProvider = errors.New("the named account has no identity provider with the token's issuer")

// ClockSkew is how far a provider's clock may be from ours: exp, nbf and
// iat are checked with this leeway, so a token issued (iat) further in the
// future is refused.
const ClockSkew = 30 * time.Second

// MaxPerAccount bounds an account's identity providers (and its cached
// JWK Sets).
const MaxPerAccount = 10

// ErrTooMany is a create beyond MaxPerAccount.
var ErrTooMany = fmt.Errorf("an account may have at most %d identity providers", MaxPerAccount)

// Verifier checks provider tokens. One per process; it caches the JWK
// Sets (see jwksCache): at most MaxSets in all and MaxPerAccount per
// account, each fetched through Client at most once at a time, within the
// waiting requests' contexts, FetchTimeout and MaxJWKSBytes.
type Verifier struct {
	DB dbutil.Executor
	// Client fetches JWK Sets; it must be the SSRF-guarded client.
	Client *http.Client
	// RefreshEvery refreshes each cached set in the background (the cached
	// set serving meanwhile); 1h when zero.
	RefreshEvery time.Duration
	// UnknownKIDEvery limits refetches on an unknown kid per cached set; 1m
	// when zero.
	UnknownKIDEvery time.Duration
	// FetchTimeout bounds one JWKS fetch; 10s when zero.
	FetchTimeout time.Duration
	// MaxSets bounds the process's cached sets; 1,000 when zero.
	MaxSets int

	once  sync.Once
	cache *jwksCache
}

func (v *Verifier) jwks() *jwksCache {
	v.once.Do(func() {
		v.cache = newJWKSCache(v.Client, orDefault(v.FetchTimeout, 10*time.Second), orDefault(v.RefreshEvery, time.Hour),
			orDefault(v.UnknownKIDEvery, time.Minute), orDefault(v.MaxSets, 1000), MaxPerAccount)
	})
	return v.cache
}

func orDefault[T time.Duration | int](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Close cancels the JWKS fetches in progress.
func (v *Verifier) Close() { v.jwks().close() }

// Verified is an accepted provider token.
type Verified struct {
	AccountID string
	// Claims are set as request.jwt.claims: sub is the linked account, the
	// provider's own identity is kept beside it.
	Claims []byte
}

// Verify judges token for the account its request names (account: the
// AccountHeader's value) by that account's provider of the token's issuer
// and its links. handled is false, at once and without a query, for a
// token without an issuer or of issuer skip (mailwatch's own): the caller
// verifies those itself.
func (v *Verifier) Verify(ctx context.Context, token, skip, account string) (*Verified, bool, error) {
	unverified, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return nil, false, nil
	}
	iss, _ := unverified.Claims.(jwt.MapClaims)["iss"].(string)
	if iss == "" || iss == skip {
		return nil, false, nil
	}
	if account == "" {
		return nil, true, ErrAccountNotNamed
	}
	accountID, err := uuid.Parse(account)
	if err != nil {
		return nil, true, ErrAccountNotNamed
	}
	p, err := dbsqlc.New().AuthProviderGetByAccountIssuer(ctx, v.DB, dbsqlc.AuthProviderGetByAccountIssuerParams{AccountID: accountID, Issuer: iss})
	if dbutil.IsNotFound(err) {
		return nil, true, ErrNoProvider
	}
	if err != nil {
		return nil, true, fmt.Errorf("%w: error reading the provider of %s: %w", ErrUnavailable, iss, err)
	}
	acct, claims, err := v.verifyWith(ctx, p, token)
	if err != nil {
		return nil, true, err
	}
	return &Verified{AccountID: acct, Claims: claims}, true, nil
}

func (v *Verifier) verifyWith(ctx context.Context, p dbsqlc.AuthProvider, token string) (string, []byte, error) {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(Algorithms), jwt.WithIssuer(p.Issuer), jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
		jwt.WithLeeway(ClockSkew),
	}
	if p.Audience != nil && *p.Audience != "" {
		opts = append(opts, jwt.WithAudience(*p.Audience))
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("token has no kid")
		}
		kf, err := v.jwks().keys(ctx, p.AccountID, p.JwksUrl, kid)
		if err != nil {
			return nil, err
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
	if row != p.AccountID {
		return "", nil, ErrNoLink // a link is its provider's account's; never another's
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
