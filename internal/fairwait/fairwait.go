// Package fairwait holds the rules of per-tenant fairness bounds on jobs:
// the gate that counts a tenant's jobs running in a worker process (Gate;
// the provider payload jobs use it), and how long work held back by such
// a bound waits before it is looked at again (Delay; also the webhook
// pushes' own gate): exponential in the waits it already made, capped, and
// jittered so that the jobs put back together do not come back together.
package fairwait

import (
	"math/rand/v2"
	"time"
)

// Delay returns base doubled once per earlier wait, at most max, spread by
// ±spread (a fraction of it) with uniform jitter, rounded to the
// millisecond. rnd supplies numbers in [0, 1); nil takes the shared
// math/rand/v2 source.
func Delay(waits int, base, max time.Duration, spread float64, rnd interface{ Float64() float64 }) time.Duration {
	d := base
	for i := 0; i < waits && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	var r float64
	if rnd != nil {
		r = rnd.Float64()
	} else {
		r = rand.Float64()
	}
	factor := 1 - spread + 2*spread*r
	return time.Duration(float64(d) * factor).Round(time.Millisecond)
}
