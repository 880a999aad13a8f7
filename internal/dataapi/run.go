package dataapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
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
	// Pages, when set, caches answers to reads of the events table.
	Pages *Pages

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
	// RawQuery is the request's query string as received: with the
	// subject, the key of a cached answer.
	RawQuery string
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
	maxRows, timeout := r.limits()
	q, err := build(c.Table, c.Request, c.AccountID, maxRows, c.Count, r.opts)
	if err != nil {
		return nil, err
	}
	exec, release, err := r.executor(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	setupArgs := []any{Role, string(c.Claims), strconv.FormatInt(timeout.Milliseconds(), 10)}

	// The events cache: only after this subject's newest visible event has
	// been read under RLS, in a batch of its own, and found unchanged.
	key, cacheable := r.cacheKey(c, q)
	if cacheable {
		if res, hit, err := r.cached(ctx, exec, key, c.AccountID, setupArgs); err != nil || hit {
			return res, err
		}
	}

	res, newest, err := read(ctx, exec, q, setupArgs, c, cacheable)
	if err != nil {
		return nil, err
	}
	if cacheable {
		r.Pages.store(key, &page{newest: newest, filledAt: r.Pages.now(), res: *res})
	}
	return res, nil
}

// limits returns the row limit and statement timeout, with their defaults
// for zero values.
func (r *Runner) limits() (maxRows int, timeout time.Duration) {
	maxRows = r.MaxRows
	if maxRows <= 0 {
		maxRows = 1000
	}
	timeout = r.StatementTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return maxRows, timeout
}

// executor returns what the read runs on, and a release to defer. Inside a
// caller's transaction (tests) that is a savepoint, always rolled back, so
// that the role and claims end with it.
func (r *Runner) executor(ctx context.Context) (dbutil.Executor, func(), error) {
	tx, ok := r.DB.(pgx.Tx)
	if !ok {
		return r.DB, func() {}, nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("error opening savepoint: %w", err)
	}
	return sp, func() { _ = sp.Rollback(context.WithoutCancel(ctx)) }, nil
}

// cacheKey returns the events cache's key for c, and whether its answer
// may be cached at all.
func (r *Runner) cacheKey(c Call, q *query) (pageKey, bool) {
	var key pageKey
	cacheable := r.Pages != nil && c.Table == cacheTable && q.offset == 0
	if cacheable {
		key = pageKey{subject: subjectOf(c.Claims), account: c.AccountID, query: c.RawQuery, count: c.Count, singular: c.Singular}
		// The newest event is read for the account the builder filters on;
		// claims naming another subject (never, unless the caller is wrong)
		// are not cached.
		cacheable = key.subject != "" && key.subject == c.AccountID
	}
	return key, cacheable
}

// cached returns the cached answer for key when there is one and the
// account's newest visible event is unchanged since it was filled; hit
// says whether it was used. Every lookup is counted.
func (r *Runner) cached(ctx context.Context, exec dbutil.Executor, key pageKey, accountID string, setupArgs []any) (res *Result, hit bool, err error) {
	if cand := r.Pages.candidate(key); cand != nil {
		batch := &pgx.Batch{}
		batch.Queue(setupSQL, setupArgs...)
		batch.Queue(newestSQL, accountID)
		newest, err := readNewest(ctx, exec, batch)
		if err != nil {
			return nil, false, err
		}
		if newest == cand.newest {
			r.Pages.observe(true)
			res := cand.res
			return &res, true, nil
		}
	}
	r.Pages.observe(false)
	return nil, false, nil
}

// read runs q. On a pool, the batch is one pipeline ending in one Sync:
// Postgres runs it as one implicit transaction, so the local settings end
// with it and the whole read is one round trip. When withNewest, the
// account's newest visible event is read too and returned.
func read(ctx context.Context, exec dbutil.Executor, q *query, setupArgs []any, c Call, withNewest bool) (*Result, uuid.UUID, error) {
	var newest uuid.UUID
	batch := &pgx.Batch{}
	batch.Queue(setupSQL, setupArgs...)
	if withNewest {
		// Read before the rows: an event committed in between is in the
		// answer but not recorded as seen, which only makes the next read
		// refill.
		batch.Queue(newestSQL, c.AccountID)
	}
	batch.Queue(q.sql, q.args...)
	if q.countSQL != "" {
		batch.Queue(q.countSQL, q.count...)
	}
	br := exec.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, newest, q.pgError(err)
	}
	if withNewest {
		if err := br.QueryRow().Scan(&newest); err != nil {
			return nil, newest, q.pgError(err)
		}
	}
	var (
		body []byte
		rows int64
	)
	if err := br.QueryRow().Scan(&body, &rows); err != nil {
		return nil, newest, q.pgError(err)
	}
	var total *int64
	if q.countSQL != "" {
		var n int64
		if err := br.QueryRow().Scan(&n); err != nil {
			return nil, newest, q.pgError(err)
		}
		total = &n
	}
	if err := br.Close(); err != nil {
		return nil, newest, q.pgError(err)
	}
	res, err := respond(q.offset, rows, total, body, c.Singular)
	return res, newest, err
}

// readNewest runs a batch of setupSQL and newestSQL.
func readNewest(ctx context.Context, exec dbutil.Executor, batch *pgx.Batch) (uuid.UUID, error) {
	var newest uuid.UUID
	br := exec.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return newest, pgError(err)
	}
	if err := br.QueryRow().Scan(&newest); err != nil {
		return newest, pgError(err)
	}
	if err := br.Close(); err != nil {
		return newest, pgError(err)
	}
	return newest, nil
}

// subjectOf returns the claims' "sub", or "" when there is none.
func subjectOf(claims []byte) string {
	var c struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(claims, &c) != nil {
		return ""
	}
	return c.Sub
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
	case len(pgErr.Code) == 5 && (pgErr.Code[:2] == "22" || pgErr.Code[:2] == "54"):
		// 22: data exception (a bad value); 54: program limit exceeded (an
		// array literal nested too deep, a value too large).
		e.Status = http.StatusBadRequest
	case pgErr.Code == "42883" || pgErr.Code == "42703" || pgErr.Code == "42804":
		e.Status = http.StatusBadRequest
	default:
		return err
	}
	return e
}

// pgError is pgError for this query's errors: a syntax error or an unknown
// object is the request's own only when it has a full-text filter, whose
// query text and configuration name Postgres parses (syntax error in
// tsquery, unknown text search configuration); anywhere else it would be a
// fault of the builder.
func (q *query) pgError(err error) error {
	var pgErr *pgconn.PgError
	if q.fullText && errors.As(err, &pgErr) && (pgErr.Code == "42601" || pgErr.Code == "42704") {
		return &Error{Status: http.StatusBadRequest, Code: pgErr.Code, Message: pgErr.Message, Details: pgErr.Detail, Hint: pgErr.Hint}
	}
	return pgError(err)
}
