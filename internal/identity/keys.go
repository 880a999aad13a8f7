// Package identity is mailwatch's embedded identity provider: it signs
// short-lived ES256 JWTs for accounts (RFC 7519, RFC 7518 section 3.4) with
// keys kept sealed in the database, publishes their public halves as a JWK
// Set (RFC 7517) and verifies tokens for the data API.
//
// Keys move through three states. A "next" key is published before it ever
// signs, so that every verifier (other replicas, PostgREST) knows it when it
// is promoted; the "current" key signs; a "retired" key still verifies the
// tokens it signed until they have expired, then it is deleted. A periodic
// River job rotates them (Rotate).
package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// Key states.
const (
	StateNext    = "next"
	StateCurrent = "current"
	StateRetired = "retired"
)

// MaxTokenTTL is the longest lifetime a token may have.
const MaxTokenTTL = 15 * time.Minute

// newKID returns a random key id (96 bits, base64url).
func newKID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// generateKey makes a P-256 key and returns its sealed private half and its
// public JWK.
func generateKey(keyring *secretbox.Keyring) (kid string, sealed []byte, keyID string, jwk json.RawMessage, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", nil, "", nil, fmt.Errorf("error generating signing key: %w", err)
	}
	kid = newKID()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", nil, "", nil, fmt.Errorf("error encoding signing key: %w", err)
	}
	sealed, keyID, err = keyring.Seal(der, []byte(kid))
	if err != nil {
		return "", nil, "", nil, fmt.Errorf("error sealing signing key: %w", err)
	}
	jwk, err = publicJWK(&priv.PublicKey, kid)
	if err != nil {
		return "", nil, "", nil, err
	}
	return kid, sealed, keyID, jwk, nil
}

func publicJWK(pub *ecdsa.PublicKey, kid string) (json.RawMessage, error) {
	k, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.AlgES256, KID: kid, USE: jwkset.UseSig},
	})
	if err != nil {
		return nil, fmt.Errorf("error building JWK: %w", err)
	}
	raw, err := json.Marshal(k.Marshal())
	if err != nil {
		return nil, fmt.Errorf("error encoding JWK: %w", err)
	}
	return raw, nil
}

func openKey(keyring *secretbox.Keyring, row dbsqlc.SigningKey) (*ecdsa.PrivateKey, error) {
	der, err := keyring.Open(row.SecretKeyID, row.PrivateCiphertext, []byte(row.Kid))
	if err != nil {
		return nil, fmt.Errorf("error opening signing key %s: %w", row.Kid, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("error parsing signing key %s: %w", row.Kid, err)
	}
	priv, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key %s is not an ECDSA key", row.Kid)
	}
	return priv, nil
}

// RotateResult says what a rotation did.
type RotateResult struct {
	Promoted string // kid of the key that became current, if any
	Retired  string // kid of the key that was retired, if any
	Created  string // kid of the new next key, if any
	Deleted  int64  // retired keys past their grace, deleted
}

// Rotate converges the keys within tx: it makes sure a next and a current
// key exist, promotes next to current (retiring the old current) when the
// current key is older than every, and deletes retired keys whose tokens
// have all expired (retired before now - grace). every <= 0 forces a
// rotation. Concurrent rotations are serialised by a table lock.
func Rotate(ctx context.Context, tx dbutil.Tx, keyring *secretbox.Keyring, now time.Time, every, grace time.Duration) (RotateResult, error) {
	q := dbsqlc.New()
	var res RotateResult
	if err := q.SigningKeyLockAll(ctx, tx); err != nil {
		return res, fmt.Errorf("error locking signing keys: %w", err)
	}
	rows, err := q.SigningKeyListForRotation(ctx, tx)
	if err != nil {
		return res, fmt.Errorf("error listing signing keys: %w", err)
	}
	var current, next *dbsqlc.SigningKey
	for i := range rows {
		switch rows[i].State {
		case StateCurrent:
			current = &rows[i]
		case StateNext:
			next = &rows[i]
		}
	}
	insert := func(state string) (string, error) {
		kid, sealed, keyID, jwk, err := generateKey(keyring)
		if err != nil {
			return "", err
		}
		var activated *time.Time
		if state == StateCurrent {
			activated = &now
		}
		_, err = q.SigningKeyInsert(ctx, tx, dbsqlc.SigningKeyInsertParams{
			ID: uuid.Must(uuid.NewV7()), Kid: kid, State: state, PrivateCiphertext: sealed, SecretKeyID: keyID,
			PublicJwk: jwk, ActivatedAt: activated,
		})
		if err != nil {
			return "", fmt.Errorf("error storing signing key: %w", err)
		}
		return kid, nil
	}
	switch {
	case current == nil && next != nil:
		if err := q.SigningKeyPromote(ctx, tx, dbsqlc.SigningKeyPromoteParams{ID: next.ID, Now: now}); err != nil {
			return res, fmt.Errorf("error promoting signing key: %w", err)
		}
		res.Promoted, next = next.Kid, nil
	case current == nil:
		kid, err := insert(StateCurrent)
		if err != nil {
			return res, err
		}
		res.Promoted = kid
	case next != nil && (every <= 0 || current.ActivatedAt == nil || !now.Before(current.ActivatedAt.Add(every))):
		if err := q.SigningKeyRetire(ctx, tx, dbsqlc.SigningKeyRetireParams{ID: current.ID, Now: now}); err != nil {
			return res, fmt.Errorf("error retiring signing key: %w", err)
		}
		if err := q.SigningKeyPromote(ctx, tx, dbsqlc.SigningKeyPromoteParams{ID: next.ID, Now: now}); err != nil {
			return res, fmt.Errorf("error promoting signing key: %w", err)
		}
		res.Retired, res.Promoted, next = current.Kid, next.Kid, nil
	}
	if next == nil {
		kid, err := insert(StateNext)
		if err != nil {
			return res, err
		}
		res.Created = kid
	}
	n, err := q.SigningKeyDeleteRetired(ctx, tx, now.Add(-grace))
	if err != nil {
		return res, fmt.Errorf("error deleting retired signing keys: %w", err)
	}
	res.Deleted = n
	return res, nil
}

// ErrNoSigningKey is returned when no current key exists yet.
var ErrNoSigningKey = errors.New("no current signing key")
