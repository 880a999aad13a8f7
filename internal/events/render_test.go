package events

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestRenderedIsValidJSON(t *testing.T) {
	t.Parallel()
	domain := "exämple.com"
	r := Rendered{ID: uuid.New(), Type: "dns_record_changed", Payload: []byte(`{"a": [1, 2]}`),
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Severity: "critical", Domain: &domain, Tags: []string{"prod", "<&>"}}
	got := r.AppendJSON(nil)
	var m map[string]any
	require.NoError(t, json.Unmarshal(got, &m), "%s", got)
	require.Equal(t, r.ID.String(), m["id"])
	require.Equal(t, "2026-01-02T03:04:05.000006Z", m["created_at"])
	require.Equal(t, []any{"prod", "<&>"}, m["tags"])
	require.Contains(t, string(got), `"tags":["prod","<&>"]`, "stored as the API sends it, not HTML-escaped")
	require.Equal(t, map[string]any{"a": []any{1.0, 2.0}}, m["payload"])

	bare := Rendered{ID: uuid.New()}
	require.NoError(t, json.Unmarshal(bare.AppendJSON(nil), &m))
	require.Nil(t, m["domain"])
	require.Equal(t, []any{}, m["tags"])
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\"back\\slash", "<script>&", "\x00\x1f\x7f", "\u2028\u2029", "\xff\xfe", "日本語", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendJSONString(nil, s)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as the API encodes
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if string(got) != string(want) {
			t.Fatalf("AppendJSONString(%q) = %s, encoding/json says %s", s, got, want)
		}
		if !utf8.Valid(got) {
			t.Fatal("invalid UTF-8 output")
		}
	})
}
