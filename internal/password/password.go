// Package password hashes account passwords with argon2id (RFC 9106) and
// verifies them in constant time. Hashes use the PHC string format so that
// parameters can be raised later without invalidating stored hashes.
//
// Every argon2id computation takes 19 MiB and a core for tens of
// milliseconds, so each one goes through a Limiter: a process-wide
// semaphore sized from the cores, with a short queue. Hash and Verify are
// the only entry points (account creation, password changes and any later
// login), so no caller can hash outside the bound.
package password

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
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

var (
	// ErrMismatch is returned by Verify for a wrong password.
	ErrMismatch = errors.New("password does not match")

	// ErrBusy is returned when no hashing slot freed up within the
	// Limiter's queue wait; the caller should answer 503 and ask the client
	// to retry (RetryAfter).
	ErrBusy = errors.New("too many password hashes in progress")
)

// RetryAfter is the delay suggested to a client refused with ErrBusy.
const RetryAfter = 2 * time.Second

// DefaultQueueWait is how long Hash and Verify wait for a slot of the
// process-wide limiter.
const DefaultQueueWait = 2 * time.Second

// Limiter bounds concurrent argon2id computations. The zero value is not
// usable; use NewLimiter. It is safe for concurrent use.
type Limiter struct {
	slots chan struct{}
	wait  time.Duration
	// peak is the most computations seen running at once (for tests and
	// figures).
	running, peak atomic.Int64
}

// NewLimiter allows slots concurrent computations (at least 1); a caller
// waits up to wait for one before getting ErrBusy.
func NewLimiter(slots int, wait time.Duration) *Limiter {
	return &Limiter{slots: make(chan struct{}, max(slots, 1)), wait: wait}
}

// process is the limiter of this process: one hash per core. Memory is
// then bounded by the cores too (19 MiB each), whatever the request rate.
// A process-wide value on purpose: the resource it guards (cores and
// memory) is the process's, however many servers the process runs.
var process = NewLimiter(runtime.GOMAXPROCS(0), DefaultQueueWait)

// Acquire takes a slot, waiting up to the limiter's queue wait (or until
// ctx ends). The caller must call release once done.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case l.slots <- struct{}{}:
	default:
		timer := time.NewTimer(l.wait)
		defer timer.Stop()
		select {
		case l.slots <- struct{}{}:
		case <-timer.C:
			return nil, ErrBusy
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
		}
	}
	n := l.running.Add(1)
	for {
		p := l.peak.Load()
		if n <= p || l.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return func() {
		l.running.Add(-1)
		<-l.slots
	}, nil
}

// Peak returns the most computations that ran at once so far.
func (l *Limiter) Peak() int64 { return l.peak.Load() }

// Hash returns the PHC-formatted argon2id hash of p, computed within l.
func (l *Limiter) Hash(ctx context.Context, p string) (string, error) {
	release, err := l.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	return hash(p)
}

// Verify checks p against a hash made by Hash, computed within l.
func (l *Limiter) Verify(ctx context.Context, p, encoded string) error {
	release, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return verify(p, encoded)
}

// Process returns the process-wide limiter that Hash and Verify use.
func Process() *Limiter { return process }

// Hash returns the PHC-formatted argon2id hash of p, within the process's
// limiter; ErrBusy when it stays full for DefaultQueueWait.
func Hash(ctx context.Context, p string) (string, error) { return process.Hash(ctx, p) }

// Verify checks p against a hash made by Hash, within the process's
// limiter: nil, ErrMismatch, ErrBusy or a malformed-hash error.
func Verify(ctx context.Context, p, encoded string) error { return process.Verify(ctx, p, encoded) }

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

func hash(p string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("error reading salt: %w", err)
	}
	key := argon2.IDKey([]byte(p), salt, timeCost, memoryKiB, threads, keyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, memoryKiB, timeCost, threads, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

func verify(p, encoded string) error {
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
