package rollups

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSplit(t *testing.T) {
	h := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	cases := []struct {
		name        string
		from, until string
		want        Window
	}{
		{"aligned both ends", "2026-01-01T10:00:00Z", "2026-01-01T13:00:00Z",
			Window{Span{h("2026-01-01T10:00:00Z"), h("2026-01-01T10:00:00Z")}, Span{h("2026-01-01T10:00:00Z"), h("2026-01-01T13:00:00Z")}, Span{h("2026-01-01T13:00:00Z"), h("2026-01-01T13:00:00Z")}}},
		{"partial both ends", "2026-01-01T10:15:00Z", "2026-01-01T13:30:00Z",
			Window{Span{h("2026-01-01T10:15:00Z"), h("2026-01-01T11:00:00Z")}, Span{h("2026-01-01T11:00:00Z"), h("2026-01-01T13:00:00Z")}, Span{h("2026-01-01T13:00:00Z"), h("2026-01-01T13:30:00Z")}}},
		{"inside one hour", "2026-01-01T10:15:00Z", "2026-01-01T10:45:00Z",
			Window{Span{h("2026-01-01T10:15:00Z"), h("2026-01-01T10:45:00Z")}, Span{h("2026-01-01T11:00:00Z"), h("2026-01-01T11:00:00Z")}, Span{h("2026-01-01T10:45:00Z"), h("2026-01-01T10:45:00Z")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Split(h(c.from), h(c.until)))
		})
	}
	open := Split(h("2026-01-01T10:15:00+02:00"), time.Time{})
	require.Equal(t, Span{h("2026-01-01T08:15:00Z"), h("2026-01-01T09:00:00Z")}, open.Head)
	require.Equal(t, Span{From: h("2026-01-01T09:00:00Z")}, open.Hours)
	require.True(t, open.Tail.Empty())
}

// TestSplitCoversEachInstantOnce checks, on random windows and instants, that
// every instant of [from, until) falls in exactly one part and no other
// instant falls in any.
func TestSplitCoversEachInstantOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	in := func(s Span, x time.Time) bool {
		return !x.Before(s.From) && (s.To.IsZero() || x.Before(s.To))
	}
	for range 2000 {
		from := base.Add(time.Duration(r.Int64N(int64(72 * time.Hour))))
		until := from.Add(time.Duration(r.Int64N(int64(30 * time.Hour))))
		w := Split(from, until)
		require.Equal(t, w.Hours.From, w.Hours.From.Truncate(time.Hour))
		require.Equal(t, w.Hours.To, w.Hours.To.Truncate(time.Hour))
		for range 20 {
			x := from.Add(time.Duration(r.Int64N(int64(32*time.Hour))) - time.Hour)
			parts := 0
			for _, s := range []Span{w.Head, w.Hours, w.Tail} {
				if in(s, x) {
					parts++
				}
			}
			want := 0
			if !x.Before(from) && x.Before(until) {
				want = 1
			}
			require.Equal(t, want, parts, "from %s until %s at %s: %+v", from, until, x, w)
		}
	}
}

func TestAfter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 1500, time.UTC)
	require.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 2000, time.UTC), After(t0))
}

func TestSplitDays(t *testing.T) {
	h := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	sp := func(a, b string) Span { return Span{h(a), h(b)} }
	cases := []struct {
		name        string
		from, until string
		want        DayWindow
	}{
		{"partial hours and days at both ends", "2026-01-01T10:15:00Z", "2026-01-04T13:30:00Z", DayWindow{
			Head:      sp("2026-01-01T10:15:00Z", "2026-01-01T11:00:00Z"),
			HeadHours: sp("2026-01-01T11:00:00Z", "2026-01-02T00:00:00Z"),
			Days:      sp("2026-01-02T00:00:00Z", "2026-01-04T00:00:00Z"),
			TailHours: sp("2026-01-04T00:00:00Z", "2026-01-04T13:00:00Z"),
			Tail:      sp("2026-01-04T13:00:00Z", "2026-01-04T13:30:00Z")}},
		{"aligned on midnights", "2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z", DayWindow{
			Head:      sp("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
			HeadHours: sp("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
			Days:      sp("2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"),
			TailHours: sp("2026-01-03T00:00:00Z", "2026-01-03T00:00:00Z"),
			Tail:      sp("2026-01-03T00:00:00Z", "2026-01-03T00:00:00Z")}},
		{"over one midnight, no whole day", "2026-01-01T10:15:00Z", "2026-01-02T13:30:00Z", DayWindow{
			Head:      sp("2026-01-01T10:15:00Z", "2026-01-01T11:00:00Z"),
			HeadHours: sp("2026-01-01T11:00:00Z", "2026-01-02T13:00:00Z"),
			Days:      sp("2026-01-02T13:00:00Z", "2026-01-02T13:00:00Z"),
			TailHours: sp("2026-01-02T13:00:00Z", "2026-01-02T13:00:00Z"),
			Tail:      sp("2026-01-02T13:00:00Z", "2026-01-02T13:30:00Z")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, SplitDays(h(c.from), h(c.until)))
		})
	}
	open := SplitDays(h("2026-01-01T10:15:00+02:00"), time.Time{})
	require.Equal(t, sp("2026-01-01T08:15:00Z", "2026-01-01T09:00:00Z"), open.Head)
	require.Equal(t, sp("2026-01-01T09:00:00Z", "2026-01-02T00:00:00Z"), open.HeadHours)
	require.Equal(t, Span{From: h("2026-01-02T00:00:00Z")}, open.Days)
	require.True(t, open.TailHours.Empty())
	require.True(t, open.Tail.Empty())
}

// TestSplitDaysCoversEachInstantOnce checks, on random windows (bounded and
// open-ended, up to a few days) and instants, that every instant of the
// window falls in exactly one part, no other instant in any, and that the
// parts lie on the boundaries their sources need.
func TestSplitDaysCoversEachInstantOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	in := func(s Span, x time.Time) bool {
		return !x.Before(s.From) && (s.To.IsZero() || x.Before(s.To))
	}
	for i := range 4000 {
		from := base.Add(time.Duration(r.Int64N(int64(72 * time.Hour))))
		until := from.Add(time.Duration(r.Int64N(int64(100 * time.Hour))))
		if i%4 == 0 {
			until = time.Time{}
		}
		w := SplitDays(from, until)
		for _, s := range []Span{w.HeadHours, w.TailHours} {
			require.Equal(t, s.From, s.From.Truncate(time.Hour))
			require.Equal(t, s.To, s.To.Truncate(time.Hour))
			// Without a whole day the hours may cross one midnight.
			limit := 24 * time.Hour
			if w.Days.Empty() {
				limit = 48 * time.Hour
			}
			require.True(t, s.Empty() || s.To.Sub(s.From) < limit, "%+v", w)
		}
		if !w.Days.Empty() {
			require.Equal(t, w.Days.From, w.Days.From.Truncate(24*time.Hour))
			require.Equal(t, w.Days.To, w.Days.To.Truncate(24*time.Hour))
		}
		// Head is the whole window when it holds no whole hour.
		require.True(t, w.Head.Empty() || w.Head.To.Sub(w.Head.From) < 2*time.Hour)
		require.True(t, w.Tail.Empty() || w.Tail.To.Sub(w.Tail.From) < time.Hour)
		for range 20 {
			x := from.Add(time.Duration(r.Int64N(int64(104*time.Hour))) - time.Hour)
			parts := 0
			for _, s := range []Span{w.Head, w.HeadHours, w.Days, w.TailHours, w.Tail} {
				if in(s, x) && !s.Empty() {
					parts++
				}
			}
			want := 0
			if !x.Before(from) && (until.IsZero() || x.Before(until)) {
				want = 1
			}
			require.Equal(t, want, parts, "from %s until %s at %s: %+v", from, until, x, w)
		}
	}
}

func TestLastDay(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	for _, c := range []struct{ now, want time.Time }{
		{time.Date(2026, 3, 15, 9, 30, 0, 0, time.UTC), time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)},
		{time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)},
		{time.Date(2026, 3, 1, 0, 0, 0, 1, time.UTC), time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 3, 15, 10, 45, 0, 0, cet), time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)},
	} {
		got := LastDay(c.now)
		if !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("LastDay(%s) = %s, want %s", c.now, got, c.want)
		}
	}
}

func TestHoursBack(t *testing.T) {
	now := time.Date(2026, 3, 15, 9, 30, 0, 0, time.UTC)
	got := HoursBack(now, 30*24*time.Hour)
	require.Equal(t, time.Date(2026, 2, 13, 8, 59, 59, 999999000, time.UTC), got)
	w := Split(After(got), time.Time{})
	require.True(t, w.Head.Empty() || w.Head.From.Equal(w.Head.To), "no partial first hour: %v", w.Head)
	require.Equal(t, time.Date(2026, 2, 13, 9, 0, 0, 0, time.UTC), w.Hours.From)
}
