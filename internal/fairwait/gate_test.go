package fairwait

import (
	"errors"
	"testing"
)

// The gate admits up to its bound of one key's jobs, refuses the next
// without counting it, leaves other keys alone, and frees a slot on
// release (a second release changes nothing).
func TestGateBoundsEachKey(t *testing.T) {
	g := NewGate[string](2, "analysis jobs", "ANALYSIS_ACCOUNT_CONCURRENCY")
	var seen []int
	g.Observe(func(_ string, n int) { seen = append(seen, n) })
	r1, err := g.Admit("a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := g.Admit("a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Admit("a")
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Limit != 2 {
		t.Fatalf("a third job of a is over the bound: %v", err)
	}
	if want := "2 analysis jobs of this account are already running (ANALYSIS_ACCOUNT_CONCURRENCY)"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if g.Running("a") != 2 {
		t.Fatalf("a refused job is counted: %d", g.Running("a"))
	}
	rb, err := g.Admit("b")
	if err != nil {
		t.Fatalf("another key is not held by a's bound: %v", err)
	}
	r1()
	r1()
	if g.Running("a") != 1 {
		t.Fatalf("releasing twice frees one slot: %d", g.Running("a"))
	}
	r3, err := g.Admit("a")
	if err != nil {
		t.Fatal(err)
	}
	r2()
	r3()
	rb()
	if g.Running("a") != 0 || g.Running("b") != 0 || len(g.running) != 0 {
		t.Fatalf("keys with nothing running are dropped: %v", g.running)
	}
	if len(seen) != 4 || seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("observed %v", seen)
	}
	if NewGate[int](0, "", "").Limit() != 1 {
		t.Fatal("a bound under one admits one")
	}
}

func TestWaits(t *testing.T) {
	for meta, want := range map[string]int{
		`{"fair_waits": 3, "other": "x"}`: 3,
		`{"other": 1}`:                    0,
		`{"fair_waits": "three"}`:         0,
		`not json`:                        0,
		``:                                0,
	} {
		if got := Waits([]byte(meta), "fair_waits"); got != want {
			t.Errorf("Waits(%q) = %d, want %d", meta, got, want)
		}
	}
}
