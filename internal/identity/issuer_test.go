package identity_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/identity"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// clock is a settable time source shared by the issuers of one test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

type testBundle struct {
	db      dbutil.Executor
	keyring *secretbox.Keyring
	clock   *clock
	issuer  *identity.Issuer
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{9}, 32))
	require.NoError(t, err)
	b := &testBundle{db: dbtest.Tx(t), keyring: keyring, clock: &clock{now: time.Now().UTC()}}
	b.issuer = b.newIssuer(t, identity.Config{})
	return b
}

func (b *testBundle) newIssuer(t *testing.T, cfg identity.Config) *identity.Issuer {
	t.Helper()
	if cfg.Issuer == "" {
		cfg.Issuer = "https://mailwatch.test"
	}
	cfg.Now = b.clock.Now
	is, err := identity.NewIssuer(b.db, b.keyring, cfg)
	require.NoError(t, err)
	return is
}

func (b *testBundle) rotate(t *testing.T) identity.RotateResult {
	t.Helper()
	res, err := dbutil.WithTxV(context.Background(), b.db, func(ctx context.Context, tx dbutil.Tx) (identity.RotateResult, error) {
		return identity.Rotate(ctx, tx, b.keyring, b.clock.Now(), 0, b.issuer.Grace())
	})
	require.NoError(t, err)
	return res
}

func TestSignVerify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	account := uuid.Must(uuid.NewV7())

	tok, err := b.issuer.Sign(ctx, account, "a@example.com")
	require.NoError(t, err)
	require.Equal(t, 900, tok.ExpiresIn)

	claims, err := b.issuer.Verify(ctx, tok.AccessToken)
	require.NoError(t, err)
	require.Equal(t, account.String(), claims.Subject)
	require.Equal(t, "authenticated", claims.Role)
	require.Equal(t, jwt.ClaimStrings{"authenticated"}, claims.Audience)
	require.Equal(t, "https://mailwatch.test", claims.Issuer)
	require.LessOrEqual(t, claims.ExpiresAt.Sub(claims.IssuedAt.Time), 15*time.Minute)

	parsed, _, err := jwt.NewParser().ParseUnverified(tok.AccessToken, jwt.MapClaims{})
	require.NoError(t, err)
	require.Equal(t, "ES256", parsed.Header["alg"])
	kid, _ := parsed.Header["kid"].(string)
	require.NotEmpty(t, kid)

	// The JWKS publishes the signing key (and the next one), public only.
	raw, err := b.issuer.JWKS(ctx)
	require.NoError(t, err)
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(raw, &set))
	require.Len(t, set.Keys, 2)
	kids := []any{set.Keys[0]["kid"], set.Keys[1]["kid"]}
	require.Contains(t, kids, kid)
	for _, k := range set.Keys {
		require.Equal(t, "ES256", k["alg"])
		require.Equal(t, "EC", k["kty"])
		require.NotContains(t, k, "d", "private parts never published")
	}
}

func TestTokenLifetimeCapped(t *testing.T) {
	t.Parallel()
	_, err := identity.NewIssuer(nil, nil, identity.Config{TTL: 16 * time.Minute})
	require.Error(t, err)
}

// TestVerifyRefuses covers every token the data API must answer 401.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	account := uuid.Must(uuid.NewV7())
	good, err := b.issuer.Sign(ctx, account, "")
	require.NoError(t, err)
	parsed, _, err := jwt.NewParser().ParseUnverified(good.AccessToken, jwt.MapClaims{})
	require.NoError(t, err)
	kid := parsed.Header["kid"].(string)

	claims := func() jwt.MapClaims {
		now := b.clock.Now()
		return jwt.MapClaims{
			"iss": "https://mailwatch.test", "aud": "authenticated", "sub": account.String(), "role": "authenticated",
			"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
		}
	}
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	signWith := func(t *testing.T, key any, method jwt.SigningMethod, kid string, c jwt.MapClaims) string {
		tok := jwt.NewWithClaims(method, c)
		if kid != "" {
			tok.Header["kid"] = kid
		}
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return s
	}

	t.Run("WrongAudience", func(t *testing.T) {
		other := b.newIssuer(t, identity.Config{Audience: "someone-else"})
		tok, err := other.Sign(ctx, account, "")
		require.NoError(t, err)
		_, err = b.issuer.Verify(ctx, tok.AccessToken)
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})
	t.Run("WrongIssuer", func(t *testing.T) {
		other := b.newIssuer(t, identity.Config{Issuer: "https://evil.test"})
		tok, err := other.Sign(ctx, account, "")
		require.NoError(t, err)
		_, err = b.issuer.Verify(ctx, tok.AccessToken)
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})
	t.Run("UnknownKID", func(t *testing.T) {
		_, err := b.issuer.Verify(ctx, signWith(t, stranger, jwt.SigningMethodES256, "no-such-key", claims()))
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})
	t.Run("KnownKIDWrongKey", func(t *testing.T) {
		_, err := b.issuer.Verify(ctx, signWith(t, stranger, jwt.SigningMethodES256, kid, claims()))
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})
	t.Run("NoKID", func(t *testing.T) {
		_, err := b.issuer.Verify(ctx, signWith(t, stranger, jwt.SigningMethodES256, "", claims()))
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})
	t.Run("AlgNone", func(t *testing.T) {
		tok := signWith(t, jwt.UnsafeAllowNoneSignatureType, jwt.SigningMethodNone, kid, claims())
		_, err := b.issuer.Verify(ctx, tok)
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})
	t.Run("HS256WithPublicKeyAsSecret", func(t *testing.T) {
		raw, err := b.issuer.JWKS(ctx)
		require.NoError(t, err)
		// Every form an attacker might try: the JWKS bytes, and the PEM.
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		require.NoError(t, json.Unmarshal(raw, &set))
		secrets := [][]byte{raw}
		for _, k := range set.Keys {
			secrets = append(secrets, k)
		}
		der, err := x509.MarshalPKIXPublicKey(&stranger.PublicKey)
		require.NoError(t, err)
		secrets = append(secrets, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		for _, secret := range secrets {
			_, err := b.issuer.Verify(ctx, signWith(t, secret, jwt.SigningMethodHS256, kid, claims()))
			require.ErrorIs(t, err, identity.ErrInvalidToken)
		}
	})
	t.Run("TooLong", func(t *testing.T) {
		// A token made by someone holding our key but with a day's lifetime
		// is refused; only tokens of at most 15 minutes are ours.
		c := claims()
		c["exp"] = b.clock.Now().Add(24 * time.Hour).Unix()
		_, err := b.issuer.Verify(ctx, signWith(t, stranger, jwt.SigningMethodES256, kid, c))
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})
	t.Run("Garbage", func(t *testing.T) {
		for _, s := range []string{"", "a.b.c", "eyJhbGciOiJFUzI1NiJ9", good.AccessToken + "x"} {
			_, err := b.issuer.Verify(ctx, s)
			require.ErrorIs(t, err, identity.ErrInvalidToken, s)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		// Last: it moves the clock.
		_, err := b.issuer.Verify(ctx, good.AccessToken)
		require.NoError(t, err)
		b.clock.Add(16 * time.Minute)
		_, err = b.issuer.Verify(ctx, good.AccessToken)
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})
}

func TestRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	account := uuid.Must(uuid.NewV7())
	old, err := b.issuer.Sign(ctx, account, "")
	require.NoError(t, err)

	// A second replica with its own cache verifies across the rotation.
	replica := b.newIssuer(t, identity.Config{})
	res := b.rotate(t)
	require.NotEmpty(t, res.Retired)
	require.NotEmpty(t, res.Promoted)
	require.NotEmpty(t, res.Created)
	b.issuer.Invalidate()

	fresh, err := b.issuer.Sign(ctx, account, "")
	require.NoError(t, err)
	for _, is := range []*identity.Issuer{b.issuer, replica} {
		_, err = is.Verify(ctx, fresh.AccessToken)
		require.NoError(t, err, "the promoted key was published as next before it signed")
		_, err = is.Verify(ctx, old.AccessToken)
		require.NoError(t, err, "a retired key verifies within its grace")
	}

	// Past the grace the retired key is refused, even by a cache that still
	// holds it, and the next rotation deletes it.
	b.clock.Add(b.issuer.Grace() + time.Second)
	_, err = b.issuer.Verify(ctx, old.AccessToken)
	require.ErrorIs(t, err, identity.ErrInvalidToken)
	res = b.rotate(t)
	require.EqualValues(t, 1, res.Deleted)
}
