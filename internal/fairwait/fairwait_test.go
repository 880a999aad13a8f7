package fairwait

import (
	"testing"
	"time"
)

type fixed float64

func (f fixed) Float64() float64 { return float64(f) }

func TestDelay(t *testing.T) {
	base, max := 250*time.Millisecond, 5*time.Second
	for _, c := range []struct {
		waits int
		r     float64
		want  time.Duration
	}{
		{0, 0.5, 250 * time.Millisecond},
		{1, 0.5, 500 * time.Millisecond},
		{3, 0.5, 2 * time.Second},
		{5, 0.5, 5 * time.Second}, // 8 s capped
		{100, 0.5, 5 * time.Second},
		{0, 0, 188 * time.Millisecond}, // 250 ms - 25%, rounded
		{5, 0.999999, 6250 * time.Millisecond},
	} {
		if got := Delay(c.waits, base, max, 0.25, fixed(c.r)); got != c.want {
			t.Errorf("Delay(%d waits, r=%v) = %s, want %s", c.waits, c.r, got, c.want)
		}
	}
	for i := 0; i < 100; i++ {
		if d := Delay(2, base, max, 0.25, nil); d < 750*time.Millisecond || d > 1250*time.Millisecond {
			t.Fatalf("Delay with the shared source = %s, outside 1 s ± 25%%", d)
		}
	}
}
