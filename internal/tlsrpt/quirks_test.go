package tlsrpt_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/tlsrpt"
)

// TestReporterQuirks reads the date-time forms real reporters send besides
// RFC 3339's, and still refuses what is not a date-time at all.
func TestReporterQuirks(t *testing.T) {
	t.Parallel()
	t.Run("ZonelessDateTimeIsUTC", func(t *testing.T) {
		// Microsoft's reports carry their date-range without a zone offset.
		raw, err := os.ReadFile("testdata/zoneless-datetime.json")
		require.NoError(t, err)
		r, err := tlsrpt.Parse(raw)
		require.NoError(t, err)
		require.Equal(t, time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), r.DateRange.Start)
		require.Equal(t, time.Date(2026, 11, 20, 23, 59, 59, 0, time.UTC), r.DateRange.End)
		ok, failed := r.Totals()
		require.Equal(t, [2]int64{120, 3}, [2]int64{ok, failed})
	})
	for name, c := range map[string]struct {
		start, end string
		want       time.Time
	}{
		"RFC3339":         {"2026-11-20T00:00:00Z", "2026-11-20T23:59:59Z", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
		"Offset":          {"2026-11-20T01:00:00+01:00", "2026-11-21T00:59:59+01:00", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
		"FractionNoZone":  {"2026-11-20T00:00:00.000", "2026-11-20T23:59:59.999", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
		"SpaceInsteadOfT": {"2026-11-20 00:00:00Z", "2026-11-20 23:59:59Z", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
		"SpaceAndNoZone":  {"2026-11-20 00:00:00", "2026-11-20 23:59:59", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := tlsrpt.Parse(report(c.start, c.end))
			require.NoError(t, err)
			require.Equal(t, c.want, r.DateRange.Start)
		})
	}
	for name, start := range map[string]string{"NotADate": "yesterday", "DateOnlyMonth": "2026-11", "Missing": ""} {
		t.Run("Refuses"+name, func(t *testing.T) {
			_, err := tlsrpt.Parse(report(start, "2026-11-20T23:59:59Z"))
			require.Error(t, err)
		})
	}
}

func report(start, end string) []byte {
	return []byte(`{"organization-name":"o","date-range":{"start-datetime":"` + start + `","end-datetime":"` + end +
		`"},"report-id":"r1","policies":[{"policy":{"policy-type":"no-policy-found","policy-domain":"example.org"},` +
		`"summary":{"total-successful-session-count":1,"total-failure-session-count":0}}]}`)
}
