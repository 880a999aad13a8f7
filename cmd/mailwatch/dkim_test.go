package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// keygen writes a key once (never over an existing file) and prints the
// record to publish; sign reads that key and prepends a signature.
func TestDKIMCommand(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "k.pem")
	var out bytes.Buffer
	require.NoError(t, runDKIM(t.Context(), []string{"keygen", "--out", key, "--domain", "example.com", "--selector", "s1"}, nil, &out))
	require.Contains(t, out.String(), "at s1._domainkey.example.com:\nv=DKIM1; k=rsa; p=")
	st, err := os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	before, err := os.ReadFile(key)
	require.NoError(t, err)
	err = runDKIM(t.Context(), []string{"keygen", "--out", key}, nil, &out)
	require.ErrorIs(t, err, os.ErrExist)
	after, err := os.ReadFile(key)
	require.NoError(t, err)
	require.Equal(t, before, after, "an existing key is kept")

	out.Reset()
	msg := "From: a@example.com\nSubject: hi\n\nbody\n"
	require.NoError(t, runDKIM(t.Context(), []string{"sign", "--key", key, "--domain", "example.com", "--selector", "s1"}, strings.NewReader(msg), &out))
	require.True(t, strings.HasPrefix(out.String(), "DKIM-Signature: "))
	require.Contains(t, out.String(), "d=example.com")
	require.True(t, strings.HasSuffix(out.String(), "From: a@example.com\r\nSubject: hi\r\n\r\nbody\r\n"))

	for _, args := range [][]string{nil, {"nope"}, {"sign", "--key", key}, {"keygen"}, {"sign", "--bogus"}, {"keygen", "--out", key, "extra"}} {
		var ue usageError
		require.ErrorAs(t, runDKIM(t.Context(), args, strings.NewReader(msg), &out), &ue, "%v", args)
	}
}
