package identity

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// RoleAuthenticated is the role claim of every token mailwatch issues and
// the database role the data API switches to.
const RoleAuthenticated = "authenticated"

// Defaults.
const (
	DefaultAudience    = "authenticated"
	DefaultIssuer      = "mailwatch"
	DefaultRotateEvery = 30 * 24 * time.Hour
	// DefaultRefresh is how long a process trusts its cached key set
	// before reading the table again.
	DefaultRefresh = 30 * time.Second
	// leeway absorbs clock skew between replicas and clients.
	leeway = 5 * time.Second
)

// Config configures an Issuer.
type Config struct {
	// Issuer is the iss claim (and the one required of our tokens).
	Issuer string
	// Audience is the aud claim (and the one required).
	Audience string
	// TTL is a token's lifetime; at most MaxTokenTTL.
	TTL time.Duration
	// Refresh bounds the age of the cached key set; DefaultRefresh when 0.
	Refresh time.Duration
	Now     func() time.Time
}

// Claims are the claims of a mailwatch token.
type Claims struct {
	jwt.RegisteredClaims
	Role  string `json:"role"`
	Email string `json:"email,omitempty"`
}

// Issuer signs and verifies mailwatch's tokens. It is safe for concurrent
// use; every API replica has one.
type Issuer struct {
	db      dbutil.Executor
	keyring *secretbox.Keyring
	cfg     Config
	q       *dbsqlc.Queries

	mu   sync.RWMutex
	keys *keySet

	loadMu sync.Mutex
	// unknownKID limits reloads caused by tokens naming a key this process
	// has not seen (a newer replica's key, or garbage).
	unknownKID *rate.Limiter
}

type keySet struct {
	loadedAt  time.Time
	signer    *ecdsa.PrivateKey
	signerKID string
	// retiredAt holds every verifying key; zero for next and current.
	retiredAt map[string]time.Time
	kf        keyfunc.Keyfunc
	jwks      json.RawMessage
}

// NewIssuer returns an Issuer over the signing_keys table.
func NewIssuer(db dbutil.Executor, keyring *secretbox.Keyring, cfg Config) (*Issuer, error) {
	if cfg.Issuer == "" {
		cfg.Issuer = DefaultIssuer
	}
	if cfg.Audience == "" {
		cfg.Audience = DefaultAudience
	}
	if cfg.TTL <= 0 {
		cfg.TTL = MaxTokenTTL
	}
	if cfg.TTL > MaxTokenTTL {
		return nil, fmt.Errorf("token lifetime %s is longer than %s", cfg.TTL, MaxTokenTTL)
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if keyring == nil {
		return nil, errors.New("identity: a keyring is required to seal signing keys")
	}
	return &Issuer{
		db: db, keyring: keyring, cfg: cfg, q: dbsqlc.New(),
		unknownKID: rate.NewLimiter(rate.Every(200*time.Millisecond), 1),
	}, nil
}

// Issuer returns the iss claim of our tokens.
func (s *Issuer) Issuer() string { return s.cfg.Issuer }

// Audience returns the aud claim of our tokens.
func (s *Issuer) Audience() string { return s.cfg.Audience }

// TTL returns a token's lifetime.
func (s *Issuer) TTL() time.Duration { return s.cfg.TTL }

// Grace is how long a retired key keeps verifying: a token's lifetime, plus
// the time a replica may keep signing with a key it has not yet seen
// retired, plus clock leeway.
func (s *Issuer) Grace() time.Duration { return GraceFor(s.cfg.TTL, s.cfg.Refresh) }

// GraceFor is Grace for a token lifetime and a key-set refresh interval.
func GraceFor(ttl, refresh time.Duration) time.Duration { return ttl + refresh + leeway }

// load reads the verifying keys and the current signing key.
func (s *Issuer) load(ctx context.Context) (*keySet, error) {
	now := s.cfg.Now()
	rows, err := s.q.SigningKeyListVerifying(ctx, s.db, now.Add(-s.Grace()))
	if err != nil {
		return nil, fmt.Errorf("error reading signing keys: %w", err)
	}
	store := jwkset.NewMemoryStorage()
	ks := &keySet{loadedAt: now, retiredAt: map[string]time.Time{}}
	for _, r := range rows {
		jwk, err := jwkset.NewJWKFromRawJSON(r.PublicJwk, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			return nil, fmt.Errorf("error reading public key %s: %w", r.Kid, err)
		}
		if err := store.KeyWrite(ctx, jwk); err != nil {
			return nil, fmt.Errorf("error storing public key %s: %w", r.Kid, err)
		}
		var retired time.Time
		if r.RetiredAt != nil {
			retired = *r.RetiredAt
		}
		ks.retiredAt[r.Kid] = retired
		if r.State == StateCurrent {
			priv, err := openKey(s.keyring, r)
			if err != nil {
				return nil, err
			}
			ks.signer, ks.signerKID = priv, r.Kid
		}
	}
	ks.jwks, err = store.JSONPublic(ctx)
	if err != nil {
		return nil, fmt.Errorf("error encoding JWK set: %w", err)
	}
	ks.kf, err = keyfunc.New(keyfunc.Options{Storage: store, UseWhitelist: []jwkset.USE{jwkset.UseSig}})
	if err != nil {
		return nil, fmt.Errorf("error building key function: %w", err)
	}
	return ks, nil
}

// current returns the cached key set, reloading it when older than Refresh
// (or always, with force). One reload runs at a time.
func (s *Issuer) current(ctx context.Context, force bool) (*keySet, error) {
	s.mu.RLock()
	ks := s.keys
	s.mu.RUnlock()
	if ks != nil && !force && s.cfg.Now().Sub(ks.loadedAt) < s.cfg.Refresh {
		return ks, nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.mu.RLock()
	fresh := s.keys
	s.mu.RUnlock()
	if fresh != nil && fresh != ks && s.cfg.Now().Sub(fresh.loadedAt) < s.cfg.Refresh {
		return fresh, nil // another caller reloaded meanwhile
	}
	ks, err := s.load(ctx)
	if err != nil {
		if fresh != nil {
			return fresh, nil // keep serving the last good set through a DB blip
		}
		return nil, err
	}
	s.mu.Lock()
	s.keys = ks
	s.mu.Unlock()
	return ks, nil
}

// Invalidate drops the cached key set (after a rotation in this process).
func (s *Issuer) Invalidate() {
	s.mu.Lock()
	s.keys = nil
	s.mu.Unlock()
}

// EnsureKeys creates the first keys when none exist, so a fresh database
// can issue tokens before the rotation job's first run.
func (s *Issuer) EnsureKeys(ctx context.Context) error {
	_, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (RotateResult, error) {
		return Rotate(ctx, tx, s.keyring, s.cfg.Now(), DefaultRotateEvery*1000, s.Grace())
	})
	if err != nil {
		return err
	}
	s.Invalidate()
	return nil
}

// Token is an issued access token.
type Token struct {
	AccessToken string
	ExpiresIn   int
}

// Sign issues a token for an account.
func (s *Issuer) Sign(ctx context.Context, accountID uuid.UUID, email string) (Token, error) {
	ks, err := s.current(ctx, false)
	if err != nil {
		return Token{}, err
	}
	if ks.signer == nil {
		if err := s.EnsureKeys(ctx); err != nil {
			return Token{}, err
		}
		if ks, err = s.current(ctx, true); err != nil {
			return Token{}, err
		}
		if ks.signer == nil {
			return Token{}, ErrNoSigningKey
		}
	}
	now := s.cfg.Now().UTC().Truncate(time.Second)
	claims := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.cfg.Issuer,
			Subject:   accountID.String(),
			Audience:  jwt.ClaimStrings{s.cfg.Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(s.cfg.TTL)),
			ID:        uuid.Must(uuid.NewV7()).String(),
		},
		Role:  RoleAuthenticated,
		Email: email,
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = ks.signerKID
	signed, err := tok.SignedString(ks.signer)
	if err != nil {
		return Token{}, fmt.Errorf("error signing token: %w", err)
	}
	return Token{AccessToken: signed, ExpiresIn: int(s.cfg.TTL / time.Second)}, nil
}

// ErrInvalidToken wraps every reason a token is refused.
var ErrInvalidToken = errors.New("invalid token")

// Verify checks a token's signature (ES256 only, by a known key named by
// kid), issuer, audience and lifetime, and returns its claims.
func (s *Issuer) Verify(ctx context.Context, token string) (*Claims, error) {
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg()}),
		jwt.WithIssuer(s.cfg.Issuer),
		jwt.WithAudience(s.cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(s.cfg.Now),
	)
	claims := new(Claims)
	_, err := parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) { return s.keyFor(ctx, t) })
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if claims.ExpiresAt.Sub(claims.IssuedAt.Time) > MaxTokenTTL {
		return nil, fmt.Errorf("%w: lifetime longer than %s", ErrInvalidToken, MaxTokenTTL)
	}
	if _, err := uuid.Parse(claims.Subject); err != nil {
		return nil, fmt.Errorf("%w: sub is not an account id", ErrInvalidToken)
	}
	return claims, nil
}

func (s *Issuer) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	kid, ok := t.Header["kid"].(string)
	if !ok || kid == "" {
		return nil, errors.New("token has no kid")
	}
	ks, err := s.current(ctx, false)
	if err != nil {
		return nil, err
	}
	retired, known := ks.retiredAt[kid]
	if !known {
		if s.unknownKID.Allow() {
			if ks, err = s.current(ctx, true); err != nil {
				return nil, err
			}
		} else {
			// Another request is (or just was) reloading: use its result.
			s.loadMu.Lock()
			//lint:ignore SA2001 taking and releasing the lock waits for an in-flight reload
			s.loadMu.Unlock()
			s.mu.RLock()
			ks = s.keys
			s.mu.RUnlock()
			if ks == nil { // invalidated since: load it ourselves
				if ks, err = s.current(ctx, false); err != nil {
					return nil, err
				}
			}
		}
		retired, known = ks.retiredAt[kid]
	}
	if !known {
		return nil, fmt.Errorf("unknown key %q", kid)
	}
	if !retired.IsZero() && s.cfg.Now().After(retired.Add(s.Grace())) {
		return nil, fmt.Errorf("key %q was retired", kid)
	}
	return ks.kf.KeyfuncCtx(ctx)(t)
}

// JWKS returns the public keys as a JWK Set document.
func (s *Issuer) JWKS(ctx context.Context) (json.RawMessage, error) {
	ks, err := s.current(ctx, false)
	if err != nil {
		return nil, err
	}
	if ks.signer == nil {
		// A fresh database: make the first keys rather than publish none.
		if err := s.EnsureKeys(ctx); err != nil {
			return nil, err
		}
		if ks, err = s.current(ctx, true); err != nil {
			return nil, err
		}
	}
	return ks.jwks, nil
}
