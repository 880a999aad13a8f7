package domainname

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	t.Parallel()

	valid := []struct {
		in, want string
	}{
		{"example.com", "example.com"},
		{"Example.COM.", "example.com"},
		{"  mail.example.com ", "mail.example.com"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"ＥＸＡＭＰＬＥ．ｃｏｍ", "example.com"},
		{"xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"example.co.uk", "example.co.uk"},
		{"someone.github.io", "someone.github.io"},
		{"a-b.example.org", "a-b.example.org"},
	}
	for _, tc := range valid {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := Normalize(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	invalid := []struct {
		in, msg string
	}{
		{"", "empty"},
		{".", "empty"},
		{"example..com", "empty label"},
		{".example.com", "empty label"},
		{"example.com..", "empty label"},
		{"exa mple.com", "not a valid domain name"},
		{"exa_mple.com", "not a valid domain name"},
		{"-example.com", ""},
		{"com", "top-level"},
		{"co.uk", "public suffix"},
		{"github.io", "public suffix"},
		{"192.0.2.1", "IP address"},
		{"[2001:db8::1]", "IP address"},
		{"example.123", "all-numeric"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
		{strings.Repeat("abcdefghi.", 26) + "com", "longer than 253"},
		{strings.Repeat("x", 2000), "longer than"},
	}
	for _, tc := range invalid {
		t.Run("invalid "+tc.in, func(t *testing.T) {
			t.Parallel()
			_, err := Normalize(tc.in)
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"example.com", "bücher.example", "co.uk", "a..b", "xn--bcher-kva.de."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Normalize(s)
		if err != nil {
			return
		}
		// A normalised name normalises to itself.
		again, err := Normalize(got)
		if err != nil || again != got {
			t.Fatalf("Normalize(%q) = %q, but Normalize(%q) = %q, %v", s, got, got, again, err)
		}
	})
}
