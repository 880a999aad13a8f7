package api

import (
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// BenchmarkEventsPageResponse is the serving path of a cached events page
// (`scripts/bench events` hits the first-page cache): 50 stored
// renderings of about 356 bytes through writeResponse into a response.
func BenchmarkEventsPageResponse(b *testing.B) {
	item := []byte(`{"id":"0190c8e2-7b3a-7c4e-8f00-000000000001","event_type":"dns_record_changed","payload":{"domain":"example.com","check":"spf","before":{"status":"pass","records":["v=spf1 include:_spf.example.com -all"]},"after":{"status":"fail","records":[]}},"created_at":"2026-11-22T10:00:00.123456Z","severity":"critical","domain":"example.com","tags":["prod"]}`)
	raw := make([][]byte, 50)
	for i := range raw {
		raw[i] = item
	}
	app := fiber.New()
	b.ReportAllocs()
	b.SetBytes(int64(len(item) * 50))
	for b.Loop() {
		fctx := &fasthttp.RequestCtx{}
		c := app.AcquireCtx(fctx)
		if err := writeResponse(c, 200, &Page[Event]{raw: raw}); err != nil {
			b.Fatal(err)
		}
		app.ReleaseCtx(c)
	}
}
