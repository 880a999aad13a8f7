package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	"riverqueue.com/riverui"

	"github.com/mailwatch/mailwatch/internal/apikey"
	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/edge"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/jobs"
)

// uiBodyLimit bounds every request body River UI reads (its actions take
// at most 1,000 job ids), including the job actions whose ids mailwatch reads
// to reconcile their deliveries.
const uiBodyLimit = 1 << 20

// runUI serves River UI for the database on UI_ADDR, behind
// authentication. It refuses to start when nobody could get in: no basic
// auth configured and no admin account.
func runUI(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if cfg.UIBasicAuthUser == "" {
		var admins int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM accounts WHERE is_admin").Scan(&admins); err != nil {
			return fmt.Errorf("error counting admin accounts: %w", err)
		}
		if admins == 0 {
			return errors.New("nobody could log in to River UI, which needs authentication: set UI_BASIC_AUTH_USER and " +
				"UI_BASIC_AUTH_PASSWORD, or grant an account admin rights (mailwatch admin grant <email>) and use its API key")
		}
	}
	logStart(logger, cfg, "ui")
	client, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: logger}, jobs.Options{})
	if err != nil {
		return err
	}
	return serveUI(ctx, cfg, logger, pool, client)
}

// serveUI serves River UI on UI_ADDR until ctx ends.
func serveUI(ctx context.Context, cfg *config.Config, logger *slog.Logger, pool *pgxpool.Pool, client *river.Client[pgx.Tx]) error {
	h, err := newUIHandler(ctx, uiOptions{
		Pool: pool, Client: client, Logger: logger, User: cfg.UIBasicAuthUser, Password: cfg.UIBasicAuthPassword,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.UIAddr)
	if err != nil {
		return fmt.Errorf("error listening on UI_ADDR %s: %w", cfg.UIAddr, err)
	}
	logger.Info("River UI listening", slog.String("addr", ln.Addr().String()))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// uiOptions configure the River UI handler.
type uiOptions struct {
	Pool   *pgxpool.Pool
	Client *river.Client[pgx.Tx] // insert-only is enough
	Logger *slog.Logger
	// User and Password enable basic auth; admin API keys always work.
	User, Password string
}

// newUIHandler returns River UI (its API and its embedded frontend) behind
// authentication, with the delivery rows of the jobs an operator cancels,
// deletes or retries reconciled as part of the same request.
func newUIHandler(ctx context.Context, o uiOptions) (http.Handler, error) {
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(o.Client, nil),
		Logger:    o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("error creating River UI: %w", err)
	}
	if err := ui.Start(ctx); err != nil {
		return nil, fmt.Errorf("error starting River UI: %w", err)
	}
	a := &uiAuth{pool: o.Pool, logger: o.Logger,
		failures:   limiter.New(memory.NewStore(), limiter.Rate{Period: time.Minute, Limit: uiFailuresPerMinute}),
		ipFailures: limiter.New(memory.NewStore(), limiter.Rate{Period: time.Minute, Limit: uiIPFailuresPerMinute})}
	if o.User != "" {
		a.user, a.password = sha256.Sum256([]byte(o.User)), sha256.Sum256([]byte(o.Password))
		a.basic = true
	}
	conv := &uiConverge{next: ui, pool: o.Pool, emitter: &events.Emitter{River: o.Client}, logger: o.Logger}
	return uiEdge(a.wrap(conv)), nil
}

// uiEdge applies internal/edge's rules to River UI, before authentication:
// a browser holding River UI's basic-auth credentials sends them with any
// page's requests, so a state-changing request (any method but GET, HEAD
// and OPTIONS) must come from River UI's own pages (403) and carry JSON
// (415); no body may have a content coding (415) or pass uiBodyLimit (413);
// and no other page may frame River UI to make its buttons be clicked.
func uiEdge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		hasBody := r.ContentLength != 0
		if err := edge.CheckContentEncoding(hasBody, r.Header.Values("Content-Encoding")...); err != nil {
			w.Header().Set("Accept-Encoding", edge.AcceptEncoding)
			writeUIError(w, http.StatusUnsupportedMediaType, err.Error())
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			site := r.Header.Get("Sec-Fetch-Site")
			if err := edge.SameOrigin(site, r.Header.Get("Origin"), r.Host); err != nil {
				writeUIError(w, http.StatusForbidden, err.Error())
				return
			}
			if err := edge.CheckJSONBody(hasBody, r.Header.Get("Content-Type"), site); err != nil {
				writeUIError(w, http.StatusUnsupportedMediaType, err.Error())
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, uiBodyLimit)
		next.ServeHTTP(w, r)
	})
}

// uiAuth lets in a request carrying an admin account's API key (as a
// Bearer token, or as the password of basic auth, for browsers) or the
// configured basic-auth user and password.
type uiAuth struct {
	pool           *pgxpool.Pool
	logger         *slog.Logger
	basic          bool
	user, password [32]byte
	// failures counts failed logins per client IP and presented identity
	// (the basic-auth user, or a key's identifier), so that a password cannot
	// be guessed quickly, while an admin behind the same NAT or proxy, who
	// presents another identity, is not locked out by someone else's
	// guesses. ipFailures caps all failures from one address, whatever
	// identity they present.
	failures, ipFailures *limiter.Limiter
}

// uiFailuresPerMinute is how many failed logins a client IP may make per
// minute for one identity before that identity is refused (429) from it for
// the rest of the minute; uiIPFailuresPerMinute is the cap for all
// identities together, after which the address is refused.
const (
	uiFailuresPerMinute   = 20
	uiIPFailuresPerMinute = 200
)

// uiIdentity is what a request claims to be: the basic-auth user name, or
// the identifier (first 7 characters) of a bearer key. Only the limiter
// sees it.
func uiIdentity(r *http.Request) string {
	if user, _, ok := r.BasicAuth(); ok {
		return "user:" + user
	}
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(token)
		if len(token) > 7 {
			token = token[:7]
		}
		return "key:" + token
	}
	return "none"
}

func (a *uiAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		who := ip + "|" + uiIdentity(r)
		for _, l := range []struct {
			lim *limiter.Limiter
			key string
		}{{a.ipFailures, ip}, {a.failures, who}} {
			if lc, err := l.lim.Peek(r.Context(), l.key); err == nil && lc.Reached {
				w.Header().Set("Retry-After", strconv.FormatInt(max(lc.Reset-time.Now().Unix(), 1), 10))
				writeUIError(w, http.StatusTooManyRequests, "too many failed logins from this address; try again later")
				return
			}
		}
		ok, status, detail := a.check(r)
		if !ok {
			if status == http.StatusUnauthorized || status == http.StatusForbidden {
				_, _ = a.failures.Get(r.Context(), who)
				_, _ = a.ipFailures.Get(r.Context(), ip)
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="mailwatch River UI", charset="UTF-8"`)
			writeUIError(w, status, detail)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeUIError(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"detail": detail})
}

func (a *uiAuth) check(r *http.Request) (bool, int, string) {
	const how = "River UI needs an admin API key (Authorization: Bearer mw_..., or as the basic-auth password) or the UI_BASIC_AUTH_USER credentials"
	var key string
	if user, pass, ok := r.BasicAuth(); ok {
		if a.basic {
			u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
			// Both compared, always, in constant time.
			if subtle.ConstantTimeCompare(u[:], a.user[:])&subtle.ConstantTimeCompare(p[:], a.password[:]) == 1 {
				return true, 0, ""
			}
		}
		key = pass
	} else if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		key = strings.TrimSpace(token)
	}
	if key == "" {
		return false, http.StatusUnauthorized, how
	}
	if !apikey.WellFormed(key) {
		return false, http.StatusUnauthorized, "invalid credentials; " + how
	}
	row, err := dbsqlc.New().APIKeyGetByHash(r.Context(), a.pool, apikey.Hash(key))
	if dbutil.IsNotFound(err) {
		return false, http.StatusUnauthorized, "invalid or revoked API key; " + how
	}
	if err != nil {
		a.logger.ErrorContext(r.Context(), "River UI: error checking an API key", slog.Any("error", err))
		return false, http.StatusServiceUnavailable, "authentication is temporarily unavailable"
	}
	if !row.IsAdmin {
		return false, http.StatusForbidden, "the API key's account is not an admin (mailwatch admin grant <email>)"
	}
	if row.SuspendedAt != nil {
		return false, http.StatusForbidden, "the API key's account is suspended"
	}
	return true, 0, ""
}

// uiConverge makes River UI's job actions (cancel, delete, retry) take
// effect on delivery rows at once: after River UI has changed the jobs, the
// rows they own are reconciled before the answer goes back, instead of at
// the periodic reconciler's next run.
type uiConverge struct {
	next    http.Handler
	pool    *pgxpool.Pool
	emitter *events.Emitter
	logger  *slog.Logger
}

func (c *uiConverge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !isJobAction(r.URL.Path) {
		c.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body) // bounded by uiBodyLimit (uiEdge)
	if err != nil {
		writeUIError(w, http.StatusRequestEntityTooLarge, "request body too large or unreadable")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
	c.next.ServeHTTP(rec, r)
	if rec.status == http.StatusOK {
		if ids := jobActionIDs(body); len(ids) > 0 {
			if _, err := deliveries.ReconcileJobs(r.Context(), c.pool, c.emitter, ids); err != nil {
				// The periodic reconciler repairs the rows later.
				c.logger.WarnContext(r.Context(), "River UI: error reconciling deliveries of changed jobs", slog.Any("error", err))
			}
		}
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
}

// isJobAction reports whether path is River UI's cancel, delete or retry
// endpoint (POST /api/jobs/{cancel,delete,retry}).
func isJobAction(path string) bool {
	switch path {
	case "/api/jobs/cancel", "/api/jobs/delete", "/api/jobs/retry":
		return true
	}
	return false
}

// jobActionIDs reads {"ids": [...]} of a job action; River UI sends the
// ids as strings (int64 beyond JavaScript's precision) or numbers.
func jobActionIDs(body []byte) []int64 {
	var req struct {
		IDs []json.RawMessage `json:"ids"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	out := make([]int64, 0, len(req.IDs))
	for _, raw := range req.IDs {
		s := strings.Trim(string(raw), `"`)
		if id, err := strconv.ParseInt(s, 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// bufferedResponse holds River UI's answer until the rows are reconciled.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }

// serveDevUI serves River UI in `mailwatch dev`. A laptop may run several
// dev processes, so a UI_ADDR already taken only costs this one its UI.
func serveDevUI(ctx context.Context, cfg *config.Config, logger *slog.Logger, pool *pgxpool.Pool, client *river.Client[pgx.Tx]) error {
	if cfg.UIBasicAuthUser == "" {
		logger.Info("River UI takes an admin API key: mailwatch admin grant <email>, then log in with any user name and the key as password")
	}
	if err := serveUI(ctx, cfg, logger, pool, client); err != nil {
		// An error, not a warning: whatever holds UI_ADDR would get the
		// admin key a user sends to River UI's address.
		logger.Error("River UI is NOT served: UI_ADDR belongs to another program; set UI_ADDR to a free address (scripts/run picks one)",
			slog.String("ui_addr", cfg.UIAddr), slog.Any("error", err))
		<-ctx.Done()
	}
	return nil
}

// reconcileJob brings the delivery rows of a job an operator just
// cancelled or retried with `mailwatch jobs` up to date at once, as River
// UI's actions do.
func reconcileJob(ctx context.Context, pool *pgxpool.Pool, client *river.Client[pgx.Tx], id int64) error {
	if _, err := deliveries.ReconcileJobs(ctx, pool, &events.Emitter{River: client}, []int64{id}); err != nil {
		return fmt.Errorf("the job changed, but its delivery rows wait for the periodic reconciler: %w", err)
	}
	return nil
}
