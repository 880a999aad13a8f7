package dataapi

import (
	"context"
	"testing"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// BenchmarkRunEvents reads a 50-event first page through Run on a pool,
// with and without the events cache (profile with -cpuprofile).
func BenchmarkRunEvents(b *testing.B) {
	pool, _ := dbtest.NewDB(b)
	alice := seed(b, pool, 200)
	const q = "limit=50&order=created_at.desc"
	req, err := Parse(q)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		pages *Pages
	}{{"uncached", nil}, {"cached", NewPages(time.Minute, 1<<20)}} {
		b.Run(bc.name, func(b *testing.B) {
			r := &Runner{DB: pool, Pages: bc.pages}
			call := Call{Table: "events", AccountID: alice.id.String(), Claims: alice.claims, Request: req, RawQuery: q}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := r.Run(context.Background(), call); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
