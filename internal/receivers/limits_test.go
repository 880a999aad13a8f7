package receivers_test

import (
	"errors"
	"net"
	"net/smtp"
	"net/textproto"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/mimetest"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDeepNestingRefusedOverSMTP: the 10,000-level message gets a permanent
// 554 5.6.0 naming the limit at the end of DATA (it used to take 45 s of
// CPU and then a 451, which a real sender retries forever); the session
// goes on and the receiver stays empty.
func TestDeepNestingRefusedOverSMTP(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	now := testNow()
	r := insertReceiver(t, tx, testfactory.Account(t, tx), "email", newAddress(), now.Add(time.Hour))
	srv, err := smtpd.NewServer(smtpd.Config{Domain: "inbound.mailwatch.test", MaxMessageBytes: 10 << 20}, newStore(t, tx, now), nil)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })

	c, err := smtp.Dial(ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Mail("sender@example.org"))
	require.NoError(t, c.Rcpt(r.Address))
	w, err := c.Data()
	require.NoError(t, err)
	raw := mimetest.Nested(10000)
	before := cpuTime()
	_, err = w.Write(raw)
	require.NoError(t, err)
	err = w.Close()
	t.Logf("%d bytes, 10,000 nested parts: refused after %s of process CPU", len(raw), cpuTime()-before)
	var reply *textproto.Error
	require.True(t, errors.As(err, &reply), "%v", err)
	require.Equal(t, 554, reply.Code)
	require.Contains(t, reply.Msg, "5.6.0")
	require.Contains(t, reply.Msg, "nesting depth is over the limit of 20 levels")

	// The session goes on: the next message is accepted.
	require.NoError(t, c.Mail("sender@example.org"))
	require.NoError(t, c.Rcpt(r.Address))
	w, err = c.Data()
	require.NoError(t, err)
	_, err = w.Write([]byte("Subject: fine\r\n\r\nhello\r\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())

	var n int
	require.NoError(t, tx.QueryRow(t.Context(), "SELECT count(*) FROM receiver_messages WHERE receiver_id = $1", r.ID).Scan(&n))
	require.Equal(t, 1, n)
}
