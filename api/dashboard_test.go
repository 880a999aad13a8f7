package api_test

import (
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
)

// TestAtRiskDescriptionIsTheThreshold: a struct tag cannot name a
// constant, so the documented threshold of at_risk is held to the one the
// query counts with.
func TestAtRiskDescriptionIsTheThreshold(t *testing.T) {
	f, ok := reflect.TypeFor[api.DashboardDomains]().FieldByName("AtRisk")
	require.True(t, ok)
	require.Contains(t, f.Tag.Get("description"), "below "+strconv.Itoa(domains.AtRiskBelow)+".")
}

// TestDashboardLastDayStartsOnAnHour: the summary's last 24 hours are the
// current UTC hour so far and the 24 whole hours before it, so they are
// read from hourly counters alone: at 09:30 an event of 09:10 the day
// before (24 h 20 min ago) is counted, one of 08:59 is not.
func TestDashboardLastDayStartsOnAnHour(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 15, 9, 30, 0, 0, time.UTC)
	b := setup(t, func(o *setupOpts) { o.now = func() time.Time { return now } })
	a := b.createAccount(t)
	b.emit(t, a.ID, events.Event{Type: events.TypeBounceSpike, At: time.Date(2026, 3, 14, 9, 10, 0, 0, time.UTC)})
	b.emit(t, a.ID, events.Event{Type: events.TypeDMARCReportReceived, At: time.Date(2026, 3, 14, 8, 59, 0, 0, time.UTC)})
	b.emit(t, a.ID, events.Event{Type: events.TypeDMARCReportReceived, At: now.Add(-time.Minute)})

	var d struct {
		Events24h struct{ Info, Warning, Critical int64 } `json:"events_last_24h"`
	}
	resp := b.do(t, "GET", "/api/accounts/me/dashboard-summary", a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	resp.JSON(t, &d)
	require.Equal(t, int64(1), d.Events24h.Warning, "09:10 the day before is in the window")
	require.Equal(t, int64(1), d.Events24h.Info, "08:59 the day before is not")
}
