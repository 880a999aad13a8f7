// Package password hashes account passwords with argon2id (RFC 9106) and
// verifies them in constant time. Hashes use the PHC string format so that
// parameters can be raised later without invalidating stored hashes.
package password

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

const (
	// MinLength and MaxLength bound a password, in characters.
	MinLength = 8
	MaxLength = 256

	// Parameters follow OWASP's argon2id recommendation (19 MiB, t=2, p=1).
	memoryKiB = 19 * 1024
	timeCost  = 2
	threads   = 1
	saltLen   = 16
	keyLen    = 32
)

// ErrMismatch is returned by Verify for a wrong password.
var ErrMismatch = errors.New("password does not match")

// Validate checks the password rules and returns a user-facing reason.
func Validate(p string) error {
	n := utf8.RuneCountInString(p)
	switch {
	case !utf8.ValidString(p):
		return errors.New("must be valid UTF-8")
	case n < MinLength:
		return fmt.Errorf("must be at least %d characters", MinLength)
	case n > MaxLength:
		return fmt.Errorf("must be at most %d characters", MaxLength)
	case strings.TrimSpace(p) == "":
		return errors.New("must not be only whitespace")
	}
	return nil
}

// Hash returns the PHC-formatted argon2id hash of p.
func Hash(p string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("error reading salt: %w", err)
	}
	key := argon2.IDKey([]byte(p), salt, timeCost, memoryKiB, threads, keyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, memoryKiB, timeCost, threads, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// Verify checks p against a hash made by Hash.
func Verify(p, encoded string) error {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return errors.New("unsupported password hash format")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return errors.New("unsupported argon2 version")
	}
	var m uint32
	var t uint32
	var th uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &th); err != nil {
		return errors.New("malformed argon2 parameters")
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return errors.New("malformed salt")
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil {
		return errors.New("malformed hash")
	}
	got := argon2.IDKey([]byte(p), salt, t, m, th, uint32(len(want)))
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrMismatch
	}
	return nil
}
