package web

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
)

// The health chart is a titled, described SVG with a time axis, the
// changes that were events marked, and the same numbers as a table.
func TestHealthChart(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC)
	// Newest first, as the API lists them: 90, 92, 40 (oldest to newest).
	hist := []api.HealthEntry{{Score: 40, ComputedAt: t0.Add(48 * time.Hour)}, {Score: 92, ComputedAt: t0.Add(24 * time.Hour)}, {Score: 90, ComputedAt: t0}}
	out := string(healthChart("ex<ample>.com", hist))
	require.Contains(t, out, `role="img"`)
	require.Contains(t, out, `<title id="health-chart-t">Health score of ex&lt;ample&gt;.com</title>`)
	require.Contains(t, out, "3 computations from Nov 20 to Nov 22, from 90 to 40 out of 100.")
	require.Contains(t, out, `>Nov 20 06:00</text>`, "a time axis")
	require.Contains(t, out, `>100</text>`, "a score axis")
	require.Equal(t, 1, strings.Count(out, `class="mark"`), "only the fall of 52 was an event, not the rise of 2")
	require.Contains(t, out, "Health score changed: ex&lt;ample&gt;.com: score fell from 92 to 40")
	require.Len(t, regexp.MustCompile(`<tr><td>`).FindAllString(out, -1), 3, "a table row per computation")
	require.NotContains(t, out, "<ample>")

	one := string(healthChart("example.com", hist[2:]))
	require.Contains(t, one, "One computation so far: 90 out of 100.")
	require.Contains(t, one, "<circle", "a single point is drawn")
	require.Contains(t, string(healthChart("example.com", nil)), "no data yet")
}

func TestChartStackedAndThresholds(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	c := chart{ID: "c", Title: "Mail", Desc: "d", Stacked: true, Series: []chartSeries{{"Passing", "bar-0"}, {"Failing", "bar-2"}},
		Points:     []chartPoint{{At: day, Values: []float64{30, 10}}, {At: day.AddDate(0, 0, 1), Values: []float64{0, 5}}},
		Thresholds: []chartThreshold{{Value: 20, Label: "limit"}}}
	out := string(c.render())
	require.Equal(t, 3, strings.Count(out, "<rect "), "a zero value draws no bar")
	require.Contains(t, out, `class="threshold"`)
	require.Contains(t, out, `>40</text>`, "the axis: 4 whole steps of 10 up to 40")
	require.Contains(t, out, `>10</text>`)
	require.Contains(t, out, `<ul class="legend">`)
	require.Equal(t, 50.0, niceCeil(40))
	require.Equal(t, 2.5, niceCeil(2.1))
	require.Equal(t, "0.25", formatValue(0.25))
	require.Equal(t, "33.33", formatValue(100.0/3))
	require.Equal(t, "2.5", formatValue(2.5))
}
