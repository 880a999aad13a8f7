package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMatchAnalyses: the n-th message of a receiver is paired with the
// n-th 250 for its address, an address whose counts differ is left out,
// and the rate runs from the first 250 to the last stored analysis.
func TestMatchAnalyses(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acks := map[string][]time.Time{
		"a@x.test": {at(0), at(1000)},
		"b@x.test": {at(10)},
		"c@x.test": {at(20), at(30)}, // one 250 more than stored messages
	}
	rows := []analysisRow{
		// Out of seq order, and the address in another case.
		{Address: "A@x.test", Seq: 2, Attempted: at(1040), Finished: at(1050)},
		{Address: "a@x.test", Seq: 1, Attempted: at(70), Finished: at(100)},
		{Address: "b@x.test", Seq: 1, Attempted: at(1990), Finished: at(2010)},
		{Address: "c@x.test", Seq: 1, Attempted: at(40), Finished: at(50)},
	}
	res := matchAnalyses(acks, rows)
	require.Equal(t, 3, res.Analysed)
	require.Equal(t, 1, res.Unmatched)
	require.Equal(t, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 2000 * time.Millisecond}, res.Latencies)
	require.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}, res.Runs)
	require.InDelta(t, 3/2.01, res.Rate, 1e-9)

	require.Zero(t, matchAnalyses(acks, nil).Rate)
}

func TestMetOrNot(t *testing.T) {
	require.Equal(t, "met", metOrNot(19*time.Millisecond, 99*time.Millisecond))
	require.Equal(t, "not met", metOrNot(20*time.Millisecond, time.Millisecond))
	require.Equal(t, "not met", metOrNot(time.Millisecond, 100*time.Millisecond))
}
