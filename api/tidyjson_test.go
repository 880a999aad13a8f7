package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestTidyJSON: whitespace outside strings goes, HTML-safe escapes become
// their characters, everything else (other escapes, an escaped backslash
// before "u003c", text inside strings) is kept.
func TestTidyJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1, "b": [1, 2], "c": "x, y: z"}`, `{"a":1,"b":[1,2],"c":"x, y: z"}`},
		{`{"s":"\u003cb\u003e \u0026 \\u003c \" \u00e9"}`, `{"s":"<b> & \\u003c \" \u00e9"}`},
		{"[\n {\"a\" : \"\\\\\"}\n]\n", `[{"a":"\\"}]`},
		{`"abc`, `"abc`},
		{`"a\`, `"a\`},
	} {
		got := string(tidyJSON([]byte(tc.in)))
		if got != tc.want {
			t.Errorf("%q: got %q want %q", tc.in, got, tc.want)
		}
		if json.Valid([]byte(tc.in)) && !json.Valid([]byte(got)) {
			t.Errorf("%q: invalid output", tc.in)
		}
	}
}

// BenchmarkTidyJSON tidies a 50-event page (stored renderings need it
// only when they hold an HTML-safe escape).
func BenchmarkTidyJSON(b *testing.B) {
	item := []byte(`{"id":"0190c8e2-7b3a-7c4e-8f00-000000000001","event_type":"dns_record_changed","payload":{"domain":"example.com","check":"spf","before":{"status":"pass","records":["v=spf1 include:_spf.example.com -all"]},"after":{"status":"fail","records":[]}},"created_at":"2026-11-22T10:00:00.123456Z","severity":"critical","domain":"example.com","tags":["prod"]},`)
	body := append([]byte("["), bytes.Repeat(item, 50)...)
	buf := make([]byte, len(body))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		copy(buf, body)
		tidyJSON(buf)
	}
}
