package dataapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Role is the database role every data-API query runs as.
const Role = "authenticated"

// Runner executes read requests. The zero values of MaxRows and
// StatementTimeout mean 1000 rows and 5 s.
type Runner struct {
	DB               dbutil.Executor
	MaxRows          int
	StatementTimeout time.Duration

	opts buildOptions
}

// Call is one read.
type Call struct {
	Table string
	// AccountID is the caller's account; Claims are the JWT claims (JSON)
	// set as request.jwt.claims, whose "sub" the policies compare.
	AccountID string
	Claims    []byte
	Request   *Request
	// Count asks for the total (Prefer: count=exact).
	Count bool
	// Singular asks for one object (Accept: application/vnd.pgrst.object+json).
	Singular bool
}

// Result is the answer to a read.
type Result struct {
	Status       int
	Body         []byte
	ContentRange string
}

// setupSQL switches the implicit (or savepoint) transaction to the
// caller's role and claims, read-only, with a statement timeout. Every
// setting is local: it ends with the transaction.
const setupSQL = `SELECT set_config('role', $1, true), set_config('request.jwt.claims', $2, true),
	set_config('statement_timeout', $3, true), set_config('transaction_read_only', 'on', true)`

// Run executes c. Errors are *Error with PostgREST's code, or unexpected
// failures.
func (r *Runner) Run(ctx context.Context, c Call) (*Result, error) {
	maxRows := r.MaxRows
	if maxRows <= 0 {
		maxRows = 1000
	}
	timeout := r.StatementTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	q, err := build(c.Table, c.Request, c.AccountID, maxRows, c.Count, r.opts)
	if err != nil {
		return nil, err
	}

	exec := r.DB
	if tx, ok := exec.(pgx.Tx); ok {
		// Inside a caller's transaction (tests): a savepoint, always rolled
		// back, so that the role and claims end with it.
		sp, err := tx.Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("error opening savepoint: %w", err)
		}
		defer func() { _ = sp.Rollback(context.WithoutCancel(ctx)) }()
		exec = sp
	}
	// On a pool, the batch is one pipeline ending in one Sync: Postgres runs
	// it as one implicit transaction, so the local settings end with it and
	// the whole read is one round trip.
	batch := &pgx.Batch{}
	batch.Queue(setupSQL, Role, string(c.Claims), strconv.FormatInt(timeout.Milliseconds(), 10))
	batch.Queue(q.sql, q.args...)
	if q.countSQL != "" {
		batch.Queue(q.countSQL, q.count...)
	}
	br := exec.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, pgError(err)
	}
	var (
		body []byte
		rows int64
	)
	if err := br.QueryRow().Scan(&body, &rows); err != nil {
		return nil, pgError(err)
	}
	var total *int64
	if q.countSQL != "" {
		var n int64
		if err := br.QueryRow().Scan(&n); err != nil {
			return nil, pgError(err)
		}
		total = &n
	}
	if err := br.Close(); err != nil {
		return nil, pgError(err)
	}
	return respond(q.offset, rows, total, body, c.Singular)
}

// respond computes PostgREST's status, Content-Range and body.
func respond(offset int, rows int64, total *int64, body []byte, singular bool) (*Result, error) {
	lower, upper := int64(offset), int64(offset)+rows-1
	rangeStr := "*"
	if lower <= upper && (total == nil || *total != 0) {
		rangeStr = strconv.FormatInt(lower, 10) + "-" + strconv.FormatInt(upper, 10)
	}
	totalStr := "*"
	status := http.StatusOK
	if total != nil {
		totalStr = strconv.FormatInt(*total, 10)
		switch {
		case lower > *total:
			return nil, &Error{Status: http.StatusRequestedRangeNotSatisfiable, Code: "PGRST103",
				Message: "Requested range not satisfiable",
				Details: fmt.Sprintf("An offset of %d was requested, but there are only %d rows.", offset, *total)}
		case 1+upper-lower < *total:
			status = http.StatusPartialContent
		}
	}
	res := &Result{Status: status, Body: body, ContentRange: rangeStr + "/" + totalStr}
	if singular {
		if rows != 1 {
			return nil, &Error{Status: http.StatusNotAcceptable, Code: "PGRST116",
				Message: "JSON object requested, multiple (or no) rows returned",
				Details: fmt.Sprintf("The result contains %d rows", rows)}
		}
		// json_agg of one row is exactly "[" + object + "]".
		res.Body = body[1 : len(body)-1]
		res.Status = http.StatusOK
	}
	return res, nil
}

// pgError maps the database's refusals to PostgREST's answers; other
// errors are returned as they are.
func pgError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	e := &Error{Code: pgErr.Code, Message: pgErr.Message, Details: pgErr.Detail, Hint: pgErr.Hint}
	switch {
	case pgErr.Code == "42501": // insufficient privilege
		e.Status = http.StatusForbidden
	case pgErr.Code == "57014": // statement timeout
		e.Status = http.StatusServiceUnavailable
		e.Message = "the query took too long and was cancelled"
	case len(pgErr.Code) == 5 && pgErr.Code[:2] == "22": // data exception: a bad value
		e.Status = http.StatusBadRequest
	case pgErr.Code == "42883" || pgErr.Code == "42703" || pgErr.Code == "42804":
		e.Status = http.StatusBadRequest
	default:
		return err
	}
	return e
}
