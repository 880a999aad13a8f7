package smtpd

import (
	"errors"
	"io"
	"net"
	"net/textproto"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// safetyNet bounds a test client's connection only so that a server that
// never closes fails the test instead of hanging it; the server's own
// bounds, set small in each test, are what close the connections.
const safetyNet = time.Minute

// dialFrom connects to addr from the loopback address src (Linux routes
// all of 127.0.0.0/8 to the loopback interface) and reads the first reply.
func dialFrom(t *testing.T, src, addr string) (conn *textproto.Conn, code int, msg string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	nc, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, nc.SetDeadline(time.Now().Add(safetyNet)))
	conn = textproto.NewConn(nc)
	t.Cleanup(func() { _ = conn.Close() })
	code, msg, err = conn.ReadResponse(0)
	require.NoError(t, err)
	return conn, code, msg
}

// requireClosed reads until the server closes the connection.
func requireClosed(t *testing.T, conn *textproto.Conn) {
	t.Helper()
	for {
		line, err := conn.ReadLine()
		if err != nil {
			require.True(t, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err), "%v", err)
			return
		}
		t.Logf("before the close: %s", line)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// TestConnectionCaps: past the per-IP cap a client gets 421 and is
// disconnected while other addresses are still served; past the total
// cap everyone does; a closed session frees its place.
func TestConnectionCaps(t *testing.T) {
	t.Parallel()
	bundle := setup(t, setupOpts{maxConnections: 3, maxConnectionsPerIP: 2})

	first, code, _ := dialFrom(t, "127.0.0.1", bundle.addr)
	require.Equal(t, 220, code)
	_, code, _ = dialFrom(t, "127.0.0.1", bundle.addr)
	require.Equal(t, 220, code)

	over, code, msg := dialFrom(t, "127.0.0.1", bundle.addr)
	require.Equal(t, 421, code, msg)
	require.Contains(t, msg, "4.7.0")
	require.Contains(t, msg, "from your address")
	requireClosed(t, over)

	_, code, msg = dialFrom(t, "127.0.0.2", bundle.addr)
	require.Equal(t, 220, code, "another address is still served: %s", msg)

	full, code, msg := dialFrom(t, "127.0.0.3", bundle.addr)
	require.Equal(t, 421, code, "the total cap is reached: %s", msg)
	require.Contains(t, msg, "4.7.0")
	requireClosed(t, full)

	// QUIT: the server frees the place before it closes the connection.
	id, err := first.Cmd("QUIT")
	require.NoError(t, err)
	first.StartResponse(id)
	_, _, err = first.ReadResponse(221)
	first.EndResponse(id)
	require.NoError(t, err)
	requireClosed(t, first)
	_, code, msg = dialFrom(t, "127.0.0.1", bundle.addr)
	require.Equal(t, 220, code, msg)
}

// exchange sends one command and reads its reply.
func exchange(t *testing.T, conn *textproto.Conn, line string) (int, string) {
	t.Helper()
	id, err := conn.Cmd("%s", line)
	require.NoError(t, err)
	conn.StartResponse(id)
	defer conn.EndResponse(id)
	code, msg, err := conn.ReadResponse(0)
	require.NoError(t, err, "the server answers or closes; no reply by the safety net means it did neither")
	return code, msg
}

// TestIdleCommandsDoNotExtend: NOOP and RSET keep a session busy without
// moving a message forward, so they do not restart the read timeout: the
// session is closed once ReadTimeout has passed since it last made
// progress, however fast the client chatters.
func TestIdleCommandsDoNotExtend(t *testing.T) {
	t.Parallel()
	bundle := setup(t, setupOpts{readTimeout: time.Second})
	conn, code, _ := dialFrom(t, "127.0.0.1", bundle.addr)
	require.Equal(t, 220, code)
	for i := 0; ; i++ {
		code, msg := exchange(t, conn, []string{"NOOP", "RSET", "HELO client.example.org"}[i%3])
		if code == 421 {
			require.Contains(t, msg, "4.4.2")
			break
		}
		require.Equal(t, 250, code, msg)
	}
	requireClosed(t, conn)
}

// TestSessionDeadline: a session that keeps making progress (MAIL, RCPT,
// RSET, again) is still closed at SessionTimeout, and so is one that stops
// in the middle of DATA, where each read would otherwise get a fresh
// ReadTimeout.
func TestSessionDeadline(t *testing.T) {
	t.Parallel()

	t.Run("Progressing", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{sessionTimeout: 500 * time.Millisecond})
		conn, code, _ := dialFrom(t, "127.0.0.1", bundle.addr)
		require.Equal(t, 220, code)
		code, _ = exchange(t, conn, "EHLO client.example.org")
		require.Equal(t, 250, code)
		for i := 0; ; i++ {
			code, msg := exchange(t, conn, []string{"MAIL FROM:<a@example.org>", "RCPT TO:<live@" + testDomain + ">", "RSET"}[i%3])
			if code == 421 {
				break
			}
			require.Equal(t, 250, code, msg)
		}
		requireClosed(t, conn)
	})

	t.Run("StalledData", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, setupOpts{sessionTimeout: 500 * time.Millisecond})
		conn, code, _ := dialFrom(t, "127.0.0.1", bundle.addr)
		require.Equal(t, 220, code)
		code, _ = exchange(t, conn, "EHLO client.example.org")
		require.Equal(t, 250, code)
		code, _ = exchange(t, conn, "MAIL FROM:<a@example.org>")
		require.Equal(t, 250, code)
		code, _ = exchange(t, conn, "RCPT TO:<live@"+testDomain+">")
		require.Equal(t, 250, code)
		code, _ = exchange(t, conn, "DATA")
		require.Equal(t, 354, code)
		_, err := conn.W.WriteString("Subject: a byte at a time\r\n")
		require.NoError(t, err)
		require.NoError(t, conn.W.Flush())
		requireClosed(t, conn)
	})
}
