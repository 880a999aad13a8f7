// Package secretbox encrypts small secrets at rest (webhook signing secrets,
// provider tokens) with AES-256-GCM under keys taken from the environment.
//
// Every ciphertext is stored next to the id of the key that sealed it. A
// Keyring holds one primary key, used to seal, and any number of previous
// keys, used only to open. Rotating a key is therefore:
//
//  1. set MAILWATCH_SECRET_KEY to a new key and move the old one into
//     MAILWATCH_SECRET_KEY_PREVIOUS (comma-separated, newest first);
//  2. optionally re-seal rows whose key id is not Keyring.PrimaryKeyID()
//     (Keyring.NeedsReseal tells);
//  3. drop the old key from MAILWATCH_SECRET_KEY_PREVIOUS once no row uses it.
//
// Key ids are derived from the key itself (see KeyID), so no extra
// configuration is needed and the same key always has the same id on every
// replica.
//
// The ciphertext layout is nonce (12 bytes) || GCM output (plaintext + 16-byte
// tag). Associated data is authenticated but not stored: callers bind a
// ciphertext to its row by passing e.g. the row id, so a ciphertext copied to
// another row fails to open.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

const (
	// KeySize is the length in bytes of every key: AES-256.
	KeySize = 32

	// EnvPrimaryKey is the environment variable holding the primary key,
	// standard base64 of KeySize bytes.
	EnvPrimaryKey = "MAILWATCH_SECRET_KEY"

	// EnvPreviousKeys is the environment variable holding older keys that
	// can still open ciphertexts: comma-separated standard base64 values.
	EnvPreviousKeys = "MAILWATCH_SECRET_KEY_PREVIOUS"

	// keyIDContext separates key-id hashing from any other use of SHA-256
	// over the key.
	keyIDContext = "mailwatch key id"

	// keyIDLen is the number of hex characters of the key id.
	keyIDLen = 8
)

var (
	// ErrUnknownKeyID is returned by Open when no key of the ring has the
	// ciphertext's key id: the key was removed from the environment too early.
	ErrUnknownKeyID = errors.New("secretbox: unknown key id")

	// ErrDecrypt is returned by Open when authentication fails: wrong key,
	// tampered ciphertext or different associated data.
	ErrDecrypt = errors.New("secretbox: message authentication failed")
)

// KeyID returns the id of key: the first 8 hex characters of
// SHA-256("mailwatch key id" || key). It is stable and reveals nothing usable
// about the key.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte(keyIDContext))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil))[:keyIDLen]
}

// GenerateKey returns a new random key encoded as MAILWATCH_SECRET_KEY
// expects it (standard base64 of KeySize bytes).
func GenerateKey() string {
	key := make([]byte, KeySize)
	_, _ = rand.Read(key) // never fails since Go 1.24
	return base64.StdEncoding.EncodeToString(key)
}

// Keyring seals with its primary key and opens with any of its keys. It is
// immutable and safe for concurrent use.
type Keyring struct {
	primaryID string
	aeads     map[string]cipher.AEAD
	keys      map[string][]byte // for Derive only
}

// NewKeyring builds a Keyring from raw keys. primary seals new secrets;
// previous keys only open. Every key must be KeySize bytes. Repeating a key
// is harmless.
func NewKeyring(primary []byte, previous ...[]byte) (*Keyring, error) {
	kr := &Keyring{aeads: make(map[string]cipher.AEAD, 1+len(previous)), keys: make(map[string][]byte, 1+len(previous))}
	id, err := kr.add(primary)
	if err != nil {
		return nil, fmt.Errorf("primary key: %w", err)
	}
	kr.primaryID = id
	for i, key := range previous {
		if _, err := kr.add(key); err != nil {
			return nil, fmt.Errorf("previous key %d: %w", i+1, err)
		}
	}
	return kr, nil
}

// ParseKeyring builds a Keyring from the values of MAILWATCH_SECRET_KEY
// (primary, required) and MAILWATCH_SECRET_KEY_PREVIOUS (previous,
// comma-separated, may be empty). Errors name the variable at fault and never
// contain key material.
func ParseKeyring(primary, previous string) (*Keyring, error) {
	if strings.TrimSpace(primary) == "" {
		return nil, fmt.Errorf("%s is not set: generate one with `openssl rand -base64 32`", EnvPrimaryKey)
	}
	primaryKey, err := decodeKey(primary)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvPrimaryKey, err)
	}
	var previousKeys [][]byte
	n := 0
	for part := range strings.SplitSeq(previous, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		n++
		key, err := decodeKey(part)
		if err != nil {
			return nil, fmt.Errorf("%s entry %d: %w", EnvPreviousKeys, n, err)
		}
		previousKeys = append(previousKeys, key)
	}
	return NewKeyring(primaryKey, previousKeys...)
}

// FromEnv builds a Keyring from MAILWATCH_SECRET_KEY and
// MAILWATCH_SECRET_KEY_PREVIOUS read through getenv (os.Getenv in
// production, a map lookup in tests).
func FromEnv(getenv func(string) string) (*Keyring, error) {
	return ParseKeyring(getenv(EnvPrimaryKey), getenv(EnvPreviousKeys))
}

func decodeKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(s))
	if err != nil {
		// The base64 error carries an offset only, never key material.
		return nil, fmt.Errorf("not valid standard base64: %w", err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("key is %d bytes, want %d (32 random bytes, standard base64)", len(key), KeySize)
	}
	return key, nil
}

func (kr *Keyring) add(key []byte) (string, error) {
	if len(key) != KeySize {
		return "", fmt.Errorf("key is %d bytes, want %d", len(key), KeySize)
	}
	id := KeyID(key)
	if _, ok := kr.aeads[id]; ok {
		// Same id: the same key given twice (a collision of two distinct
		// keys in 32 bits among a handful of keys is not a practical concern,
		// but would only make the older key unusable, never leak data).
		return id, nil
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return "", fmt.Errorf("error creating cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return "", fmt.Errorf("error creating GCM: %w", err)
	}
	kr.aeads[id] = aead
	kr.keys[id] = append([]byte(nil), key...)
	return id, nil
}

// Derive returns a 32-byte key for one purpose, derived with HKDF-SHA256
// (RFC 5869) from the ring's key with id keyID and info naming the purpose,
// so a MAC key rotates with the secret key without ever being the
// encryption key. ok is false when the ring has no such key.
func (kr *Keyring) Derive(keyID, info string) (key []byte, ok bool) {
	master, ok := kr.keys[keyID]
	if !ok {
		return nil, false
	}
	key, err := hkdf.Key(sha256.New, master, nil, info, KeySize)
	if err != nil {
		// Only a length over 255 hash blocks fails.
		panic(err)
	}
	return key, true
}

// PrimaryKeyID returns the id of the key Seal uses.
func (kr *Keyring) PrimaryKeyID() string { return kr.primaryID }

// Has reports whether the ring holds a key with the given id.
func (kr *Keyring) Has(keyID string) bool {
	_, ok := kr.aeads[keyID]
	return ok
}

// NeedsReseal reports whether a ciphertext sealed under keyID should be
// re-sealed with the primary key (it was sealed with a previous key).
func (kr *Keyring) NeedsReseal(keyID string) bool { return keyID != kr.primaryID }

// Seal encrypts plaintext with the primary key, authenticating
// associatedData with it, and returns the ciphertext (random nonce prepended)
// and the id of the key to store beside it.
func (kr *Keyring) Seal(plaintext, associatedData []byte) (ciphertext []byte, keyID string, err error) {
	aead := kr.aeads[kr.primaryID]
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, "", fmt.Errorf("error reading nonce: %w", err)
	}
	return aead.Seal(out, out, plaintext, associatedData), kr.primaryID, nil
}

// Open decrypts a ciphertext produced by Seal under the key with id keyID,
// with the same associatedData. It returns ErrUnknownKeyID when that key is
// not in the ring and ErrDecrypt when the key, ciphertext or associated data
// do not match.
func (kr *Keyring) Open(keyID string, ciphertext, associatedData []byte) ([]byte, error) {
	aead, ok := kr.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("%w %q (add the key to %s)", ErrUnknownKeyID, keyID, EnvPreviousKeys)
	}
	ns := aead.NonceSize()
	if len(ciphertext) < ns+aead.Overhead() {
		return nil, fmt.Errorf("%w: ciphertext too short (%d bytes)", ErrDecrypt, len(ciphertext))
	}
	plaintext, err := aead.Open(nil, ciphertext[:ns], ciphertext[ns:], associatedData)
	if err != nil {
		return nil, ErrDecrypt
	}
	return plaintext, nil
}

// String describes the ring without key material, so a Keyring that ends up
// in a log line or a %v leaks nothing.
func (kr *Keyring) String() string {
	return fmt.Sprintf("secretbox.Keyring{primary: %s, keys: %d}", kr.primaryID, len(kr.aeads))
}

// GoString is String, for %#v.
func (kr *Keyring) GoString() string { return kr.String() }
