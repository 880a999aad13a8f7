package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// databaseRetryAfter is the Retry-After (seconds) of a 503 answered while
// the database is unreachable: Postgres restarts take a few seconds.
const databaseRetryAfter = "5"

// DatabaseUnavailable reports whether err means that Postgres could not be
// reached or the connection to it was lost, as opposed to a query failing
// on its own (a constraint, a syntax error): the request may succeed if it
// is retried once the database is back, so it is a 503, not a 500.
func DatabaseUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if definitelyDatabase(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return false // the server answered: a query error, not a lost database
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	// pgx reports a connection lost mid-query as "conn closed" or an
	// unexpected EOF, sometimes without a typed error.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF")
}

// slowDatabase reports whether err is a statement that got no answer in
// time: cut by the client-side bound (dbutil.Bounded, DB_STATEMENT_TIMEOUT
// plus a second) or cancelled by the server's statement_timeout.
func slowDatabase(err error) bool {
	if dbutil.IsStatementTimeout(err) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57014" // query_canceled
}

// definitelyDatabase reports whether err can only have come from Postgres
// being unreachable: pgx could not connect, or the server said it is
// shutting down, starting or full. A bare network error (refused, reset,
// EOF) may also come from any other dial a request makes (a DNS provider,
// a JWKS host), so the outage log confirms those with a ping.
func definitelyDatabase(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-03: the server is shutting
		// down or starting; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" ||
			pgErr.Code == "57P03" || pgErr.Code == "53300"
	}
	return false
}

// outageLog turns database-unavailable errors into 503s with Retry-After
// and a detail, and logs an outage once at warn when it starts and once at
// info when the database answers again (with how many requests it
// refused), instead of one error line per request.
type outageLog struct {
	logger *slog.Logger
	ping   func(context.Context) error
	every  time.Duration
	// answer says what the process does meanwhile, for the outage line.
	answer string

	mu      sync.Mutex
	down    bool
	since   time.Time
	refused int
}

func newOutageLog(logger *slog.Logger, ping func(context.Context) error) *outageLog {
	return &outageLog{logger: logger, ping: ping, every: 250 * time.Millisecond, answer: "answering 503 with Retry-After"}
}

// OutageLog logs a database outage once when it starts and once when the
// database answers again, for roles without the API's error handler (the
// SMTP listener, which answers 451 meanwhile).
type OutageLog struct{ o *outageLog }

// NewOutageLog returns an outage log; answer says what the process does
// during an outage ("answering 451"); ping checks the database.
func NewOutageLog(logger *slog.Logger, answer string, ping func(context.Context) error) *OutageLog {
	o := newOutageLog(logger, ping)
	o.answer = answer
	return &OutageLog{o: o}
}

// Observe records err when it means the database is unreachable or did not
// answer in time (confirmed by a ping unless only Postgres gives such an
// error), and reports whether it did.
func (l *OutageLog) Observe(err error) bool {
	if err == nil || !(slowDatabase(err) || DatabaseUnavailable(err)) || !l.o.confirm(err) {
		return false
	}
	l.o.failed(err)
	return true
}

// handler wraps the error handler: a database-unavailable error becomes a
// 503 (logged by the outage, not per request); anything else passes on.
func (o *outageLog) handler(next fiber.ErrorHandler) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		if e := o.unavailable(c, err); e != nil {
			return next(c, e)
		}
		return next(c, err)
	}
}

// unavailable returns the 503 (with Retry-After) that err calls for when it
// means the database is unreachable or did not answer in time, recording
// the outage; nil for any other error. The API's error handler and the
// dashboard's error pages both answer with it.
func (o *outageLog) unavailable(c *fiber.Ctx, err error) *Error {
	var apiErr *Error
	if err == nil || errors.As(err, &apiErr) && apiErr.Status < 500 {
		return nil
	}
	if slowDatabase(err) {
		// Frozen, or this statement that slow: either way the request may
		// succeed later. A frozen server fails the ping too and is an
		// outage; a slow statement alone is logged (throttled) by the
		// caller's logger.
		if o.confirm(err) {
			o.failed(err)
		} else {
			o.logger.Warn("database statement cut by DB_STATEMENT_TIMEOUT", slog.String("path", c.Path()), slog.Any("error", err))
		}
		return &Error{
			Status:  http.StatusServiceUnavailable,
			Detail:  "the database did not answer in time; try again shortly",
			Headers: map[string]string{fiber.HeaderRetryAfter: databaseRetryAfter},
		}
	}
	if !DatabaseUnavailable(err) || !o.confirm(err) {
		return nil
	}
	o.failed(err)
	return &Error{
		Status:  http.StatusServiceUnavailable,
		Detail:  "the database is unavailable; try again shortly",
		Headers: map[string]string{fiber.HeaderRetryAfter: databaseRetryAfter},
	}
}

// confirm reports whether a network-looking err is the database's: an
// error only Postgres gives is, during a known outage every such error is,
// and otherwise a ping decides (the database answering means the failed
// dial was somewhere else, a plain 500).
func (o *outageLog) confirm(err error) bool {
	if definitelyDatabase(err) || o.ping == nil {
		return true
	}
	o.mu.Lock()
	down := o.down
	o.mu.Unlock()
	if down {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return o.ping(ctx) != nil
}

// failed records a refused request; the first of an outage logs it and
// starts watching for the database to come back.
func (o *outageLog) failed(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused++
	if o.down {
		return
	}
	o.down, o.since, o.refused = true, time.Now(), 1
	o.logger.Warn("database unavailable: "+o.answer+" until it is back", slog.Any("error", err))
	if o.ping != nil {
		go o.watch()
	}
}

// watch pings the database until it answers, then logs the recovery.
func (o *outageLog) watch() {
	for {
		time.Sleep(o.every)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := o.ping(ctx)
		cancel()
		if err == nil {
			break
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.logger.Info("database reachable again", slog.Duration("outage", time.Since(o.since).Round(time.Millisecond)),
		slog.Int("requests_refused", o.refused))
	o.down = false
}
