// Package apikey creates and hashes mailwatch API keys.
//
// A key is "mw_" followed by 40 random base62 characters (about 238 bits).
// Only its SHA-256 is stored; the key identifier (the first 7 characters) is
// kept in clear so that people can tell their keys apart in listings.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"strings"
)

const (
	// Prefix starts every key.
	Prefix = "mw_"
	// SecretLength is the number of base62 characters after the prefix.
	SecretLength = 40
	// IdentifierLength is how many leading characters identify a key.
	IdentifierLength = 7

	alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// Key is a newly generated key. Plain is shown to the user once.
type Key struct {
	Plain      string
	Identifier string
	Hash       []byte
}

// Generate returns a new random key.
func Generate() Key {
	var b strings.Builder
	b.Grow(len(Prefix) + SecretLength)
	b.WriteString(Prefix)
	// Rejection sampling keeps every character uniformly distributed:
	// bytes >= 248 (= 4*62) are discarded.
	buf := make([]byte, 64)
	for n := 0; n < SecretLength; {
		_, _ = rand.Read(buf) // crypto/rand never fails on supported platforms
		for _, c := range buf {
			if c >= 248 || n == SecretLength {
				continue
			}
			b.WriteByte(alphabet[c%62])
			n++
		}
	}
	plain := b.String()
	return Key{Plain: plain, Identifier: plain[:IdentifierLength], Hash: Hash(plain)}
}

// Hash returns the SHA-256 of a key, the only form in which keys are stored.
func Hash(plain string) []byte {
	sum := sha256.Sum256([]byte(plain))
	return sum[:]
}

// WellFormed reports whether s has the shape of a key, so that malformed
// credentials are refused without a database lookup.
func WellFormed(s string) bool {
	if len(s) != len(Prefix)+SecretLength || !strings.HasPrefix(s, Prefix) {
		return false
	}
	for i := len(Prefix); i < len(s); i++ {
		if strings.IndexByte(alphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}
