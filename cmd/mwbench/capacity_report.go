package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// stepLatencies fills each kind's p50 and p99: the ingress's requests, the
// normalisation of the payloads received in the window (from their rows),
// the emitting transactions, the pushes' commit to receipt, the checks'
// insert to completion.
func (r *capacityRig) stepLatencies(ctx context.Context, kinds []*capacityKind, watch *pushWatch, t0, t1 time.Time) error {
	in, norm, emitted, pushed, checked := kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]
	in.p50, in.p99 = percentile(in.pacer.lat, 50), percentile(in.pacer.lat, 99)
	var p50, p99 float64
	if err := r.env.Pool.QueryRow(ctx, `
		SELECT coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY s), 0), coalesce(percentile_disc(0.99) WITHIN GROUP (ORDER BY s), 0)
		FROM (SELECT extract(epoch FROM processed_at - received_at)::float8 AS s FROM provider_payloads
		      WHERE received_at >= $1 AND received_at < $2 AND processed_at IS NOT NULL) t`, t0, t1).Scan(&p50, &p99); err != nil {
		return err
	}
	norm.p50, norm.p99 = time.Duration(p50*float64(time.Second)), time.Duration(p99*float64(time.Second))
	emitted.p50, emitted.p99 = percentile(emitted.pacer.lat, 50), percentile(emitted.pacer.lat, 99)
	pushed.p50, pushed.p99 = percentile(watch.lat, 50), percentile(watch.lat, 99)
	lat := r.checks.take()
	checked.p50, checked.p99 = percentile(lat, 50), percentile(lat, 99)
	return nil
}

// printStep prints one mixed step and its verdict.
func printStep(sum float64, d time.Duration, kinds []*capacityKind, jobs map[string][2]int, loadBefore string, drainedIn time.Duration, left string, errs int64) {
	fmt.Printf("step at predicted sum %.2f, %s mixed (load average %s before, %s after):\n", sum, d, loadBefore, loadAverage())
	fmt.Printf("  %-27s %5s %9s %9s %9s %16s %12s %10s %10s  %s\n",
		"kind", "share", "solo/s", "offered/s", "carried/s", "backlog (1 s=)", "River a/r", "p50 ms", "p99 ms", "latency of")
	for _, k := range kinds {
		jr := "-"
		if k.riverKind != "" {
			j := jobs[k.riverKind]
			jr = fmt.Sprintf("%d/%d", j[0], j[1])
		}
		fmt.Printf("  %-27s %5.2f %9.0f %9.0f %9.0f %16s %12s %10.1f %10.1f  %s\n",
			k.name, k.share, k.solo, k.load(), k.achieved, fmt.Sprintf("%d (%.0f)", k.endBacklog, k.load()), jr, ms(k.p50), ms(k.p99), k.latency)
	}
	if l := kinds[4].pacer.lat; len(l) > 0 {
		fmt.Printf("  inserting a check job (the scheduler's part): p50 %.1f ms, p99 %.1f ms\n", ms(percentile(l, 50)), ms(percentile(l, 99)))
	}
	if left != "" {
		fmt.Printf("  not drained after %s: %s\n", drainedIn.Round(time.Millisecond), left)
	} else {
		fmt.Printf("  backlog drained %s after the window\n", drainedIn.Round(time.Millisecond))
	}
	if errs > 0 {
		fmt.Printf("  %d calls failed (counted as not carried)\n", errs)
	}
	fmt.Printf("  verdict: %s\n", capacityVerdict(kinds))
}

// capacityVerdict is "the model holds" when every kind ended the window
// with a backlog within one second of its load, else the kinds that fell
// behind, the first first.
func capacityVerdict(kinds []*capacityKind) string {
	var behind []*capacityKind
	for _, k := range kinds {
		if float64(k.endBacklog) > k.load() {
			behind = append(behind, k)
		}
	}
	if len(behind) == 0 {
		return "the model holds (every kind kept up: backlog within one second of its load)"
	}
	slices.SortStableFunc(behind, func(a, b *capacityKind) int { return int(a.firstBehind - b.firstBehind) })
	out := "fell behind first: "
	for i, k := range behind {
		if i > 0 {
			out += "; then "
		}
		out += fmt.Sprintf("%s (backlog over one second of load at %.1f s, %d at the end)", k.name, k.firstBehind.Seconds(), k.endBacklog)
	}
	return out
}
