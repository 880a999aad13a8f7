package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/jobs"
)

// eventJSON is an event as the API shows it (alert fields included).
type eventJSON struct {
	ID             string          `json:"id"`
	EventType      string          `json:"event_type"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      time.Time       `json:"created_at"`
	Severity       string          `json:"severity"`
	Domain         *string         `json:"domain"`
	Tags           []string        `json:"tags"`
	Acknowledged   bool            `json:"acknowledged"`
	AcknowledgedBy *string         `json:"acknowledged_by"`
	AcknowledgedAt *time.Time      `json:"acknowledged_at"`
	Note           *string         `json:"note"`
	AckKey         *string         `json:"acknowledged_key_identifier"`
}

// emit writes an event for account the way a producer does.
func (b *testBundle) emit(t *testing.T, accountID string, ev events.Event) dbsqlc.Event {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	ev.AccountID = uuid.MustParse(accountID)
	if ev.Payload == nil {
		typ, ok := events.Lookup(ev.Type)
		require.True(t, ok, ev.Type)
		ev.Payload = typ.Example
	}
	row, err := dbutil.WithTxV(context.Background(), b.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Event, error) {
		return (&events.Emitter{River: client}).Emit(ctx, tx, ev)
	})
	require.NoError(t, err)
	return row
}

// listAll follows X-Next-Cursor from path until the last page.
func (b *testBundle) listAll(t *testing.T, path, key string) ([]eventJSON, int) {
	t.Helper()
	var all []eventJSON
	pages := 0
	next := path
	for {
		pages++
		require.Less(t, pages, 100)
		resp := b.do(t, "GET", next, key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s: %s", next, resp.Body)
		var page []eventJSON
		resp.JSON(t, &page)
		all = append(all, page...)
		cursor := resp.Header.Get("X-Next-Cursor")
		if cursor == "" {
			require.Empty(t, resp.Header.Get("Link"))
			return all, pages
		}
		link := resp.Header.Get("Link")
		require.True(t, strings.HasPrefix(link, "<") && strings.HasSuffix(link, `>; rel="next"`), link)
		next = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		u, err := url.Parse(next)
		require.NoError(t, err)
		require.Equal(t, cursor, u.Query().Get("cursor"))
	}
}

func ids(list []eventJSON) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.ID
	}
	return out
}

func TestEventTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	resp := b.do(t, "GET", "/api/accounts/me/events/types", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var got []struct {
		Name            string          `json:"name"`
		DefaultSeverity string          `json:"default_severity"`
		Escalation      *string         `json:"escalation"`
		Audit           bool            `json:"audit"`
		PayloadSchema   json.RawMessage `json:"payload_schema"`
		Example         json.RawMessage `json:"example"`
	}
	resp.JSON(t, &got)
	require.Len(t, got, len(events.Types()))
	byName := map[string]int{}
	for i, typ := range got {
		byName[typ.Name] = i
		require.NoError(t, events.ValidatePayload(typ.Name, typ.Example))
		require.NotEmpty(t, typ.PayloadSchema)
	}
	hs := got[byName[events.TypeHealthScoreChanged]]
	require.Equal(t, "warning", hs.DefaultSeverity)
	require.NotNil(t, hs.Escalation)
	require.True(t, got[byName[events.TypeAlertAcknowledged]].Audit)
}

// TestListEvents pages through every filter combination and compares with
// the events computed from what was emitted.
func TestListEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, other := b.createAccount(t), b.createAccount(t)
	base := time.Date(2026, 1, 10, 8, 0, 0, 0, time.UTC)
	type seeded struct {
		id  string
		typ string
		at  time.Time
	}
	var mine []seeded
	typesCycle := []string{events.TypeBounceSpike, events.TypeDMARCReportReceived, events.TypeHealthScoreChanged}
	for i := 0; i < 13; i++ {
		at := base.Add(time.Duration(i/3) * time.Minute) // three events share each timestamp
		typ := typesCycle[i%len(typesCycle)]
		row := b.emit(t, a.ID, events.Event{Type: typ, At: at, Domain: "example.com", Tags: []string{"prod"}})
		mine = append(mine, seeded{row.ID.String(), typ, at})
		b.emit(t, other.ID, events.Event{Type: typ, At: at})
	}
	since := base.Add(time.Minute) // exclusive: the three events at since are left out

	for _, typ := range []string{"", events.TypeBounceSpike} {
		for _, s := range []*time.Time{nil, &since} {
			for _, order := range []string{"", "desc", "asc"} {
				for _, limit := range []int{0, 1, 2, 4, 200} {
					q := url.Values{}
					if typ != "" {
						q.Set("event_type", typ)
					}
					if s != nil {
						q.Set("since", s.Format(time.RFC3339))
					}
					if order != "" {
						q.Set("order", order)
					}
					if limit != 0 {
						q.Set("limit", fmt.Sprint(limit))
					}
					t.Run(q.Encode(), func(t *testing.T) {
						var want []seeded
						for _, e := range mine {
							if (typ == "" || e.typ == typ) && (s == nil || e.at.After(*s)) {
								want = append(want, e)
							}
						}
						sort.SliceStable(want, func(i, j int) bool {
							if !want[i].at.Equal(want[j].at) {
								return want[i].at.Before(want[j].at)
							}
							return want[i].id < want[j].id
						})
						if order != "asc" {
							for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
								want[i], want[j] = want[j], want[i]
							}
						}
						wantIDs := make([]string, len(want))
						for i, e := range want {
							wantIDs[i] = e.id
						}
						got, pages := b.listAll(t, "/api/accounts/me/events?"+q.Encode(), a.Key)
						require.Equal(t, wantIDs, ids(got))
						per := limit
						if per == 0 {
							per = 50
						}
						require.Equal(t, max(1, (len(want)+per-1)/per), pages, "a full last page is not followed by an empty one")
						for _, e := range got {
							require.Equal(t, "example.com", *e.Domain)
							require.Equal(t, []string{"prod"}, e.Tags)
							require.NoError(t, events.ValidatePayload(e.EventType, e.Payload))
						}
					})
				}
			}
		}
	}

	t.Run("NewEventsDoNotDisturbAForwardFeed", func(t *testing.T) {
		resp := b.do(t, "GET", "/api/accounts/me/events?order=asc&limit=5", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		cursor := resp.Header.Get("X-Next-Cursor")
		require.NotEmpty(t, cursor)
		late := b.emit(t, a.ID, events.Event{Type: events.TypeBounceSpike, At: base.Add(time.Hour)})
		got, _ := b.listAll(t, "/api/accounts/me/events?order=asc&limit=5&cursor="+cursor, a.Key)
		require.Len(t, got, len(mine)-5+1)
		require.Equal(t, late.ID.String(), got[len(got)-1].ID)
	})
}

func TestListEventsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t)
	for _, tc := range []struct {
		query  string
		status int
		field  string
	}{
		{"limit=201", 422, "limit"},
		{"limit=0", 422, "limit"},
		{"limit=-1", 422, "limit"},
		{"limit=ten", 400, ""},
		{"since=yesterday", 400, ""},
		{"since=2026-01-02", 400, ""},
		{"order=sideways", 422, "order"},
		{"cursor=not-a-cursor", 400, ""},
		{"cursor=" + events.Cursor{}.String() + "x", 400, ""},
		{"event_type=no_such_type", 422, "event_type"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			resp := b.do(t, "GET", "/api/accounts/me/events?"+tc.query, a.Key, nil)
			require.Equal(t, tc.status, resp.Status, "%s", resp.Body)
			detail := resp.Detail(t)
			if tc.field != "" {
				require.Contains(t, detail, tc.field)
			}
		})
	}
	resp := b.do(t, "GET", "/api/accounts/me/events?limit=200&since=2026-01-02T15:04:05Z&order=asc", a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, "[]", strings.TrimSpace(string(resp.Body)))
}

func TestDailyVolumeAndTypeBreakdown(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 15, 9, 30, 0, 0, time.UTC)
	b := setup(t, func(o *setupOpts) { o.now = func() time.Time { return now } })
	a, other := b.createAccount(t), b.createAccount(t)
	day := func(n int) time.Time { return time.Date(2026, 3, 15-n, 23, 59, 0, 0, time.UTC) }
	b.emit(t, a.ID, events.Event{Type: events.TypeBounceSpike, At: day(0).Add(-23 * time.Hour)})
	b.emit(t, a.ID, events.Event{Type: events.TypeBounceSpike, Severity: events.SeverityCritical, At: day(0).Add(-20 * time.Hour)})
	b.emit(t, a.ID, events.Event{Type: events.TypeDMARCReportReceived, At: day(2)})
	b.emit(t, a.ID, events.Event{Type: events.TypeDMARCReportReceived, At: day(6)})
	b.emit(t, a.ID, events.Event{Type: events.TypeDMARCReportReceived, At: day(7)}) // outside 7 days
	b.emit(t, a.ID, events.Event{Type: events.TypeHealthScoreChanged, At: day(40),  // outside 30 days; a fall to 74: a warning
		Payload: json.RawMessage(`{"domain":"example.com","previous_score":80,"score":74,"delta":-6}`)})
	for i := 0; i < 4; i++ {
		b.emit(t, other.ID, events.Event{Type: events.TypeComplaintSpike, At: day(1)})
	}

	type volume struct {
		Days   int    `json:"days"`
		From   string `json:"from"`
		To     string `json:"to"`
		Volume []struct {
			Date                           string `json:"date"`
			Info, Warning, Critical, Total int64
		} `json:"volume"`
	}
	var v volume
	resp := b.do(t, "GET", "/api/accounts/me/events/daily-volume", a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	resp.JSON(t, &v)
	require.Equal(t, 7, v.Days)
	require.Equal(t, "2026-03-09", v.From)
	require.Equal(t, "2026-03-15", v.To)
	require.Len(t, v.Volume, 7)
	totals := map[string][4]int64{}
	for _, d := range v.Volume {
		totals[d.Date] = [4]int64{d.Info, d.Warning, d.Critical, d.Total}
	}
	require.Equal(t, [4]int64{0, 1, 1, 2}, totals["2026-03-15"])
	require.Equal(t, [4]int64{0, 0, 0, 0}, totals["2026-03-14"], "days without events are present, with zeros")
	require.Equal(t, [4]int64{1, 0, 0, 1}, totals["2026-03-13"])
	require.Equal(t, [4]int64{1, 0, 0, 1}, totals["2026-03-09"])

	resp = b.do(t, "GET", "/api/accounts/me/events/daily-volume?days=90", a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	resp.JSON(t, &v)
	require.Len(t, v.Volume, 90)
	var sum int64
	for _, d := range v.Volume {
		sum += d.Total
	}
	require.Equal(t, int64(6), sum)
	for _, q := range []string{"days=0", "days=91"} {
		require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", "/api/accounts/me/events/daily-volume?"+q, a.Key, nil).Status)
	}
	require.Equal(t, http.StatusBadRequest, b.do(t, "GET", "/api/accounts/me/events/daily-volume?days=week", a.Key, nil).Status)

	type breakdown struct {
		Since time.Time `json:"since"`
		Total int64     `json:"total"`
		Types []struct {
			EventType string `json:"event_type"`
			Count     int64  `json:"count"`
			Critical  int64  `json:"critical"`
		} `json:"types"`
	}
	var bd breakdown
	resp = b.do(t, "GET", "/api/accounts/me/events/type-breakdown", a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	resp.JSON(t, &bd)
	require.Equal(t, time.Date(2026, 2, 13, 8, 59, 59, 999999000, time.UTC), bd.Since, "whole hours: strictly after the instant before 09:00 30 days ago")
	require.Equal(t, int64(5), bd.Total)
	require.Len(t, bd.Types, 2)
	require.Equal(t, events.TypeDMARCReportReceived, bd.Types[0].EventType)
	require.Equal(t, int64(3), bd.Types[0].Count)
	require.Equal(t, events.TypeBounceSpike, bd.Types[1].EventType)
	require.Equal(t, int64(1), bd.Types[1].Critical)

	resp = b.do(t, "GET", "/api/accounts/me/events/type-breakdown?since="+url.QueryEscape(day(2).Format(time.RFC3339)), a.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	resp.JSON(t, &bd)
	require.Equal(t, int64(2), bd.Total, "since is exclusive")
	require.Equal(t, http.StatusBadRequest, b.do(t, "GET", "/api/accounts/me/events/type-breakdown?since=last-week", a.Key, nil).Status)

	t.Run("Dashboard", func(t *testing.T) {
		var d struct {
			Alerts struct {
				Unacknowledged int64 `json:"unacknowledged"`
			} `json:"alerts"`
			Events24h struct{ Info, Warning, Critical int64 } `json:"events_last_24h"`
		}
		resp := b.do(t, "GET", "/api/accounts/me/dashboard-summary", a.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		resp.JSON(t, &d)
		require.Equal(t, int64(1), d.Alerts.Unacknowledged)
		require.Equal(t, int64(1), d.Events24h.Warning)
		require.Equal(t, int64(1), d.Events24h.Critical)
		require.Equal(t, int64(0), d.Events24h.Info)
	})
}
