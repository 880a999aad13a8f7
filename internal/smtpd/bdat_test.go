package smtpd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bdat sends one BDAT chunk (RFC 3030) and requires the reply code.
func (c rawConn) bdat(t *testing.T, code int, chunk []byte, last bool) string {
	t.Helper()
	cmd := fmt.Sprintf("BDAT %d", len(chunk))
	if last {
		cmd += " LAST"
	}
	_, err := fmt.Fprintf(c.W, "%s\r\n", cmd)
	require.NoError(t, err)
	_, err = c.W.Write(chunk)
	require.NoError(t, err)
	require.NoError(t, c.W.Flush())
	_, msg, err := c.ReadResponse(code)
	require.NoError(t, err, "%s: %s", cmd, msg)
	return msg
}

// TestBDATOverSize: a BDAT chunk that takes the message over the cap is
// answered 552 like DATA (it used to reset the connection), whether it is
// the only chunk or a later one, and the session goes on.
func TestBDATOverSize(t *testing.T) {
	t.Parallel()
	bundle := setup(t, setupOpts{maxMessageBytes: 4096})
	conn := rawDial(t, bundle.addr)
	ehlo := conn.cmd(t, 250, "EHLO client.example.org")
	require.Contains(t, ehlo, "CHUNKING")
	require.Contains(t, ehlo, "SIZE")

	line := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\r\n")
	big := append([]byte("Subject: big\r\n\r\n"), bytes.Repeat(line, 100)...) // 6.4 KB in lines of 65

	// One chunk over the cap.
	conn.cmd(t, 250, "MAIL FROM:<a@example.org>")
	conn.cmd(t, 250, "RCPT TO:<live@"+testDomain+">")
	msg := conn.bdat(t, 552, big, true)
	require.Contains(t, msg, "5.3.4")

	// A second chunk that takes it over the cap.
	conn.cmd(t, 250, "MAIL FROM:<a@example.org>")
	conn.cmd(t, 250, "RCPT TO:<live@"+testDomain+">")
	conn.bdat(t, 250, big[:3000], false)
	conn.bdat(t, 552, big[3000:], true)

	// A chunk over the cap with one long line (no line limit applies to
	// BDAT data).
	conn.cmd(t, 250, "MAIL FROM:<a@example.org>")
	conn.cmd(t, 250, "RCPT TO:<live@"+testDomain+">")
	conn.bdat(t, 552, append([]byte("Subject: long\r\n\r\n"), bytes.Repeat([]byte("x"), 100<<10)...), true)

	// The session goes on: a small message in chunks is delivered.
	conn.cmd(t, 250, "MAIL FROM:<a@example.org>")
	conn.cmd(t, 250, "RCPT TO:<live@"+testDomain+">")
	conn.bdat(t, 250, []byte("Subject: small\r\n\r\n"), false)
	conn.bdat(t, 250, []byte("ok\r\n"), true)
	conn.cmd(t, 221, "QUIT")
	envs := bundle.store.deliveries()
	require.Len(t, envs, 1)
	require.True(t, bytes.HasSuffix(envs[0].Raw, []byte("Subject: small\r\n\r\nok\r\n")))
}

// TestDATALongLine: a line over the line limit in a message that would fit
// under the cap is refused for the line, naming it; in one that cannot fit,
// as over the cap.
func TestDATALongLine(t *testing.T) {
	t.Parallel()
	bundle := setup(t, setupOpts{maxMessageBytes: 1 << 20})
	c := dial(t, bundle.addr)
	_, err := send(t, c, "a@example.org", []string{"live@" + testDomain}, crlf("Subject: long\n\n"+strings.Repeat("x", 70<<10)+"\n"))
	requireCode(t, err, 554)
	require.ErrorContains(t, err, "5.6.0")
	require.ErrorContains(t, err, "longer than")
	require.Empty(t, bundle.store.deliveries())

	small := setup(t, setupOpts{maxMessageBytes: 64 << 10})
	c = dial(t, small.addr)
	_, err = send(t, c, "a@example.org", []string{"live@" + testDomain}, crlf("Subject: long\n\n"+strings.Repeat("x", 70<<10)+"\n"))
	requireCode(t, err, 552)
}
