package webhook

import (
	"math/rand/v2"
	"time"
)

// MaxAttempts is the number of attempts of a delivery before it is failed:
// the first one and nine retries, spread over about three days (75 h 35 min 5 s
// of base delays).
const MaxAttempts = 10

// jitter is the relative spread applied to every delay (±10%), so that
// deliveries failing together (an endpoint down) do not retry together.
const jitter = 0.10

// BaseDelay returns the delay, before jitter, between failed attempt n
// (1-based) and attempt n+1:
//
//	after attempt  1   5 s
//	after attempt  2   5 min
//	after attempt  3  30 min
//	after attempt  4   2 h
//	after attempt  5   5 h
//	after attempt  6  10 h
//	after attempt  7  14 h
//	after attempt  8  20 h
//	after attempt  9  24 h
//
// n below 1 is taken as 1; n of 9 or more (manual retries beyond the
// schedule) gives 24 h.
func BaseDelay(n int) time.Duration {
	switch {
	case n <= 1:
		return 5 * time.Second
	case n == 2:
		return 5 * time.Minute
	case n == 3:
		return 30 * time.Minute
	case n == 4:
		return 2 * time.Hour
	case n == 5:
		return 5 * time.Hour
	case n == 6:
		return 10 * time.Hour
	case n == 7:
		return 14 * time.Hour
	case n == 8:
		return 20 * time.Hour
	default:
		return 24 * time.Hour
	}
}

// Float64Source supplies uniform random numbers in [0, 1). *rand.Rand of
// math/rand and math/rand/v2 implement it.
type Float64Source interface {
	Float64() float64
}

// NextDelay returns how long to wait after failed attempt n (1-based, River's
// JobRow.Attempt after the attempt) before the next one: BaseDelay(n) with
// ±10% uniform jitter. rnd may be nil for the shared, concurrency-safe
// math/rand/v2 source. A River worker's NextRetry is
//
//	time.Now().Add(webhook.NextDelay(job.Attempt, nil))
//
// and the delivery row's next_retry_at must be set to that same instant.
func NextDelay(n int, rnd Float64Source) time.Duration {
	var r float64
	if rnd != nil {
		r = rnd.Float64()
	} else {
		r = rand.Float64()
	}
	base := BaseDelay(n)
	factor := 1 - jitter + 2*jitter*r
	return time.Duration(float64(base) * factor).Round(time.Millisecond)
}
