package edge

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckContentEncoding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		hasBody bool
		values  []string
		ok      bool
	}{
		{true, nil, true},
		{true, []string{""}, true},
		{true, []string{"identity"}, true},
		{true, []string{"Identity, identity"}, true},
		{true, []string{" , identity ,"}, true},
		{true, []string{"gzip"}, false},
		{true, []string{"GZip"}, false},
		{true, []string{"gzip, gzip"}, false},
		{true, []string{"identity, br"}, false},
		{true, []string{"identity", "deflate"}, false}, // two header fields
		{true, []string{"x-anything"}, false},
		{false, []string{"gzip"}, true}, // nothing to decode
	} {
		err := CheckContentEncoding(tc.hasBody, tc.values...)
		if tc.ok {
			require.NoError(t, err, "%v %q", tc.hasBody, tc.values)
		} else {
			require.ErrorIs(t, err, ErrContentCoding, "%v %q", tc.hasBody, tc.values)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	const host = "127.0.0.1:8081"
	for _, tc := range []struct {
		site, origin string
		ok           bool
	}{
		{"", "", true}, // curl, a script: no browser involved
		{"same-origin", "", true},
		{"same-origin", "http://elsewhere.example", true}, // the browser's verdict decides
		{"none", "", true},
		{"same-site", "http://127.0.0.1:9999", false}, // another port of the same host is another origin
		{"cross-site", "https://evil.example", false},
		{"cross-site", "", false},
		{"", "http://127.0.0.1:8081", true},
		{"", "https://127.0.0.1:8081", true}, // behind a TLS proxy
		{"", "HTTP://127.0.0.1:8081", true},
		{"", "http://127.0.0.1:9999", false},
		{"", "http://127.0.0.1", false},
		{"", "null", false},
		{"", "file://", false},
		{"", "http://127.0.0.1:8081@evil.example", false},
		{"", "%%", false},
	} {
		err := SameOrigin(tc.site, tc.origin, host)
		if tc.ok {
			require.NoError(t, err, "%q %q", tc.site, tc.origin)
		} else {
			require.ErrorIs(t, err, ErrCrossSite, "%q %q", tc.site, tc.origin)
		}
	}
}

func TestCheckJSONBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		hasBody           bool
		contentType, site string
		ok                bool
	}{
		{false, "", "", true},
		{false, "text/plain", "cross-site", true}, // no body: nothing to read (SameOrigin decides)
		{true, "application/json", "", true},
		{true, "application/json; charset=utf-8", "cross-site", true}, // a preflight River UI never grants
		{true, "application/merge-patch+json", "", true},
		{true, "text/plain;charset=UTF-8", "same-origin", true}, // River UI's own frontend
		{true, "text/plain;charset=UTF-8", "same-site", false},
		{true, "text/plain", "", false},
		{true, "application/x-www-form-urlencoded", "same-origin", false},
		{true, "multipart/form-data; boundary=x", "same-origin", false},
		{true, "", "", false},
		{true, "nonsense/", "", false},
	} {
		err := CheckJSONBody(tc.hasBody, tc.contentType, tc.site)
		if tc.ok {
			require.NoError(t, err, "%v %q %q", tc.hasBody, tc.contentType, tc.site)
		} else {
			require.ErrorIs(t, err, ErrNotJSON, "%v %q %q", tc.hasBody, tc.contentType, tc.site)
		}
	}
}
