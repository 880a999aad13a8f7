package web

import (
	"strings"
	"testing"
)

// TestLocalRedirect: a redirect target of the dashboard is kept only when
// it is a path on this site; anything a browser could read as another
// origin, or that carries characters a browser drops or rewrites before
// resolving it, becomes "/".
func TestLocalRedirect(t *testing.T) {
	t.Parallel()
	hostile := []string{
		"",
		"/\t/evil.example", // what ?next=%2F%09%2Fevil.example decodes to
		"/\n/evil.example",
		"/\r/evil.example",
		"/\r\n/evil.example",
		"\t//evil.example",
		"/ /evil.example",
		" /evil.example",
		"/evil.example ",
		"/\x00/evil.example",
		"/\x7f/evil.example",
		"/\u00a0/evil.example",
		"/\u2028/evil.example",
		"/\u200b/evil.example",
		"/\xff/evil.example",
		"/%09/evil.example", // the same, encoded once more
		"/%0A/evil.example",
		"/%2F%09%2Fevil.example",
		"%2F%09%2Fevil.example",
		"%2F%2Fevil.example",
		"/%2F/evil.example",
		"/%2f%2fevil.example",
		"/%5C/evil.example",
		"/%5cevil.example",
		"//evil.example",
		"///evil.example",
		"//evil.example/path",
		"/\\evil.example",
		"/\\/evil.example",
		"\\\\evil.example",
		"\\/evil.example",
		"/domains\\..\\..\\evil",
		"https://evil.example",
		"HTTPS://evil.example/",
		"http:evil.example",
		"http:/evil.example",
		"javascript:alert(1)",
		"data:text/html,<script>alert(1)</script>",
		"evil.example",
		"evil.example/",
		"./evil",
		"../evil",
		"?next=//evil.example",
		"#frag",
		"/%zz",
		"/" + strings.Repeat("a", 3000),
	}
	for _, raw := range hostile {
		if got := localRedirect(raw); got != "/" {
			t.Errorf("localRedirect(%q) = %q, want /", raw, got)
		}
	}
	kept := []string{
		"/",
		"/domains",
		"/domains/example.com",
		"/domains/a%2Fb",
		"/alerts?event=0190e4a5-7a3b-7c1d-9e2f-0123456789ab",
		"/events?type=dmarc_report&since=2024-01-01T00%3A00%3A00Z",
		"/dns-connections#c-0190e4a5-7a3b-7c1d-9e2f-0123456789ab",
		"/@evil.example",
		"/domains/example.com?q=a%20b",
	}
	for _, raw := range kept {
		if got := localRedirect(raw); got != raw {
			t.Errorf("localRedirect(%q) = %q, want it kept", raw, got)
		}
	}
}

// FuzzLocalRedirect: whatever comes in, what goes out is "/" or a path
// that every browser resolves on this origin.
func FuzzLocalRedirect(f *testing.F) {
	for _, s := range []string{"/", "/\t/evil.example", "//x", "/\\x", "/%2F/x", "/a?b#c", "http://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := localRedirect(raw)
		if got == "/" {
			return
		}
		if got != raw || !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") {
			t.Fatalf("localRedirect(%q) = %q", raw, got)
		}
		for _, r := range got {
			if r <= ' ' || r == 0x7f || r == '\\' || r > 0x7e {
				t.Fatalf("localRedirect(%q) kept %q", raw, r)
			}
		}
	})
}
