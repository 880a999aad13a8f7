package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
	"github.com/mailwatch/mailwatch/web"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// testBundle is one API server on its own transaction (or database).
type testBundle struct {
	srv *api.Server
	// web is the dashboard mounted on srv's app (nil on a data-API-only
	// server).
	web *web.Dashboard
	db  dbutil.Executor
	// defaultPlan is the server's DEFAULT_PLAN, for the jobs a test runs
	// by hand (billing's) to agree with it.
	defaultPlan string
}

type setupOpts struct {
	db    dbutil.Executor
	limit int64
	lim   *limiter.Limiter
	now   func() time.Time
	// deps adjusts the server's dependencies before it is built.
	deps func(*api.Deps)
}

// testGuard admits loopback webhook destinations only: tests never reach beyond this machine.
func testGuard(t *testing.T) *netguard.Guard {
	g, err := netguard.ParseGuard("127.0.0.1/32,::1/128")
	require.NoError(t, err)
	return g
}

// testInboundSecret signs the email ingress webhook in tests.
const testInboundSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// testTwilioToken verifies the SMS ingress webhook in tests.
const testTwilioToken = "test-twilio-auth-token"

func setup(t *testing.T, opts ...func(*setupOpts)) *testBundle {
	t.Helper()
	o := setupOpts{limit: 1000}
	for _, f := range opts {
		f(&o)
	}
	if o.db == nil {
		o.db = dbtest.Tx(t)
	}
	if o.lim == nil {
		o.lim = limiter.New(memory.NewStore(), limiter.Rate{Period: time.Minute, Limit: o.limit})
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	riverClient, err := jobs.NewClient(jobs.Deps{Logger: logger}, jobs.Options{})
	require.NoError(t, err)
	keyring, err := secretbox.NewKeyring(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	guard := testGuard(t)
	deps := api.Deps{
		StoreDeps:   api.StoreDeps{DB: o.db, River: riverClient, Keyring: keyring},
		WebhookDeps: api.WebhookDeps{WebhookGuard: guard, WebhookClient: webhook.NewClient(guard, webhook.ClientOptions{})},
		IngressDeps: api.IngressDeps{
			InboundDomain:        "inbound.mailwatch.test",
			InboundWebhookSecret: testInboundSecret,
			TwilioAuthToken:      testTwilioToken,
		},
		HTTPDeps: api.HTTPDeps{Limiter: o.lim},
		Logger:   logger,
		Now:      o.now,
		// As in production (EVENTS_PAGE_CACHE_TTL's default), so every
		// listing test also checks the cache never hides a new event.
		EventDeps: api.EventDeps{EventPages: events.NewFirstPages(time.Second, 1<<20)},
	}
	if o.deps != nil {
		o.deps(&deps)
	}
	srv := api.New(deps)
	b := &testBundle{srv: srv, db: o.db, defaultPlan: deps.DefaultPlan}
	if !deps.DataAPIOnly {
		b.web = web.Mount(srv, web.DepsFrom(deps, nil)) // as cmd/mailwatch does
	}
	return b
}

// response is a captured HTTP response.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) JSON(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Body, v), "body: %s", r.Body)
}

func (r response) Detail(t *testing.T) string {
	t.Helper()
	var e struct {
		Detail string `json:"detail"`
	}
	r.JSON(t, &e)
	require.NotEmpty(t, e.Detail, "error responses carry a detail: %s", r.Body)
	return e.Detail
}

// do sends one request through the whole Fiber stack and checks the
// response (and, for successful calls, the request) against the OpenAPI
// document.
func (b *testBundle) do(t *testing.T, method, path, key string, body any) response {
	t.Helper()
	var raw []byte
	switch v := body.(type) {
	case nil:
	case string:
		raw = []byte(v)
	case []byte:
		raw = v
	default:
		var err error
		raw, err = json.Marshal(v)
		require.NoError(t, err)
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := b.srv.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: got}
	checkConformance(t, b.srv, method, path, key, raw, out)
	return out
}

var (
	specOnce  sync.Once
	specValid validator.Validator
	specErr   error
)

func specValidator(t *testing.T, srv *api.Server) validator.Validator {
	t.Helper()
	specOnce.Do(func() {
		doc, err := srv.Router().OpenAPI()
		if err != nil {
			specErr = err
			return
		}
		d, err := libopenapi.NewDocument(doc)
		if err != nil {
			specErr = err
			return
		}
		v, errs := validator.NewValidator(d)
		if len(errs) > 0 {
			specErr = errs[0]
			return
		}
		specValid = v
	})
	require.NoError(t, specErr)
	return specValid
}

var specMu sync.Mutex

func checkConformance(t *testing.T, srv *api.Server, method, path, key string, body []byte, resp response) {
	t.Helper()
	contentType := ""
	if body != nil {
		contentType = "application/json"
	}
	checkConformanceAs(t, srv, method, path, key, contentType, body, resp)
}

// checkConformanceAs is checkConformance for a body of any media type (the
// raw bodies of webhooks and uploads).
func checkConformanceAs(t *testing.T, srv *api.Server, method, path, key, contentType string, body []byte, resp response) {
	t.Helper()
	if path == "/metrics" {
		return
	}
	newReq := func() *http.Request {
		r := httptest.NewRequest(method, "http://mailwatch.test"+path, bytes.NewReader(body))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		return r
	}
	httpResp := &http.Response{
		StatusCode: resp.Status,
		Header:     resp.Header,
		Body:       io.NopCloser(bytes.NewReader(resp.Body)),
		Request:    newReq(),
	}
	v := specValidator(t, srv)
	specMu.Lock() // the validator's caches are not safe for parallel use
	defer specMu.Unlock()
	if resp.Status == http.StatusNotFound || resp.Status == http.StatusMethodNotAllowed {
		// An unknown path or method cannot be in the document; the error
		// handler's shape is checked by the tests that make them.
		if _, errs := v.ValidateHttpRequest(newReq()); len(errs) > 0 && errs[0].ValidationType == "path" {
			return
		}
	}
	if resp.Status < 300 {
		ok, errs := v.ValidateHttpRequest(newReq())
		require.True(t, ok, "request %s %s does not match OpenAPI: %s", method, path, validationText(errs))
	}
	ok, errs := v.ValidateHttpResponse(newReq(), httpResp)
	require.True(t, ok, "response %d to %s %s does not match OpenAPI: %s\nbody: %s", resp.Status, method, path, validationText(errs), resp.Body)
}

func validationText(errs any) string {
	b, _ := json.MarshalIndent(errs, "", "  ")
	s := string(b)
	if len(s) > 4000 {
		s = s[:4000]
	}
	return strings.TrimSpace(s)
}

// account is a created account with its first key.
type account struct {
	ID    string
	Email string
	Key   string
}

var emailSeq struct {
	sync.Mutex
	n int
}

func uniqueEmail(t *testing.T) string {
	emailSeq.Lock()
	defer emailSeq.Unlock()
	emailSeq.n++
	name := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return strings.Trim(name, "-") + "-" + time.Now().Format("150405.000000") + "-" + string(rune('a'+emailSeq.n%26)) + "@example.com"
}

func (b *testBundle) createAccount(t *testing.T) account {
	t.Helper()
	email := uniqueEmail(t)
	resp := b.do(t, "POST", "/api/accounts", "", map[string]string{"email": email, "password": "correct horse battery"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var out struct {
		Account struct {
			ID    string `json:"id"`
			Email string `json:"email"`
		} `json:"account"`
		APIKey struct {
			Key string `json:"key"`
		} `json:"api_key"`
	}
	resp.JSON(t, &out)
	return account{ID: out.Account.ID, Email: out.Account.Email, Key: out.APIKey.Key}
}
