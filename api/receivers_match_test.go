package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/receivers"
)

type waitMessageJSON struct {
	messageJSON
	Messages []messageJSON `json:"messages"`
}

// matchEnv is one API server with its own LISTEN hub (so that hub.Len
// counts only this test's waiter), an SMTP listener and an account.
type matchEnv struct {
	b     *testBundle
	hub   *receivers.Hub
	pool  *pgxpool.Pool
	store *receivers.Store
	smtp  string
	key   string
}

func newMatchEnv(t *testing.T) *matchEnv {
	t.Helper()
	pool, dbURL := dbtest.NewDB(t)
	b, hub := committedBundle(t, pool, dbURL)
	store := testStore(t, pool)
	return &matchEnv{b: b, hub: hub, pool: pool, store: store, smtp: startSMTP(t, store, 0), key: b.createAccount(t).Key}
}

// startWait starts a wait on path and returns once it is registered with
// the hub (so that it has read where its receivers stand).
func (e *matchEnv) startWait(t *testing.T, path string) <-chan waitResult {
	t.Helper()
	before := e.hub.Len()
	res := e.b.waitAsync(t, e.key, path)
	rcvEventually(t, "the waiter to register", func() bool { return e.hub.Len() > before })
	return res
}

func (e *matchEnv) send(t *testing.T, to, headers, body string) {
	t.Helper()
	require.NoError(t, sendMail(e.smtp, "qa@sender.example", []string{to},
		"From: QA <qa@Sender.Example>\nTo: "+to+"\n"+headers+"\n\n"+body+"\n"))
}

func okMessage(t *testing.T, got waitResult) waitMessageJSON {
	t.Helper()
	require.Equal(t, http.StatusOK, got.resp.Status, "%s", got.resp.Body)
	var m waitMessageJSON
	got.resp.JSON(t, &m)
	return m
}

func TestReceiverWaitMatching(t *testing.T) {
	t.Parallel()

	t.Run("OnlySecondOfTwoMatchesSubject", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		r := e.b.createReceiver(t, e.key, nil)
		res := e.startWait(t, receiverPath(r.ID, "/wait?timeout=30&subject_contains=password+RESET"))
		e.send(t, r.Address, "Subject: Welcome aboard", "hello")
		e.send(t, r.Address, "Subject: Your Password reset link", "click")
		m := okMessage(t, <-res)
		require.Equal(t, "Your Password reset link", m.Subject)
		require.Nil(t, m.Messages, "messages is listed only with count")
	})

	t.Run("CountThreeAnswersWhenTheThirdArrives", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		r := e.b.createReceiver(t, e.key, nil)
		res := e.startWait(t, receiverPath(r.ID, "/wait?timeout=30&count=3&from=qa@sender.example"))
		for i, subject := range []string{"one", "two"} {
			e.send(t, r.Address, "Subject: "+subject, "x")
			select {
			case got := <-res:
				t.Fatalf("answered after %d of 3 messages: %d %s", i+1, got.resp.Status, got.resp.Body)
			default:
			}
		}
		e.send(t, r.Address, "Subject: three", "x")
		m := okMessage(t, <-res)
		require.Len(t, m.Messages, 3)
		var subjects []string
		for _, msg := range m.Messages {
			subjects = append(subjects, msg.Subject)
		}
		require.Equal(t, []string{"one", "two", "three"}, subjects)
		require.Equal(t, m.Messages[0].ID, m.ID, "the message itself is the first")
	})

	t.Run("HeaderMatch", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		r := e.b.createReceiver(t, e.key, nil)
		q := url.Values{"timeout": {"30"}, "header": {"x-campaign: signup", "List-Id:"}}
		res := e.startWait(t, receiverPath(r.ID, "/wait?"+q.Encode()))
		e.send(t, r.Address, "Subject: other campaign\nX-Campaign: newsletter\nList-Id: <a.example>", "x")
		e.send(t, r.Address, "Subject: no list\nX-Campaign: signup", "x")
		e.send(t, r.Address, "Subject: the one\nX-CAMPAIGN:  signup \nList-Id: <b.example>", "x")
		require.Equal(t, "the one", okMessage(t, <-res).Subject)
	})

	t.Run("BodyAndToMatch", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		r := e.b.createReceiver(t, e.key, nil)
		local, domain, _ := strings.Cut(r.Address, "@")
		q := url.Values{"timeout": {"30"}, "body_contains": {"VERIFY your"}, "to": {local + "@" + strings.ToUpper(domain)}}
		res := e.startWait(t, receiverPath(r.ID, "/wait?"+q.Encode()))
		e.send(t, r.Address, "Subject: plain", "nothing here")
		e.send(t, r.Address, "Subject: verify\nContent-Type: text/html", "<p>Please verify YOUR address</p>")
		require.Equal(t, "verify", okMessage(t, <-res).Subject)
	})

	t.Run("SinceDefaultExcludesEarlierMessage", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		r := e.b.createReceiver(t, e.key, nil)
		e.send(t, r.Address, "Subject: code 1111", "stored before the wait")
		res := e.startWait(t, receiverPath(r.ID, "/wait?timeout=30&subject_contains=code"))
		e.send(t, r.Address, "Subject: code 2222", "arrived during the wait")
		require.Equal(t, "code 2222", okMessage(t, <-res).Subject)

		// An explicit since looks back; without filters the wait is as before.
		since := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
		resp := e.b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=30&subject_contains=code&since="+since), e.key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var m waitMessageJSON
		resp.JSON(t, &m)
		require.Equal(t, "code 1111", m.Subject)
		resp = e.b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=30"), e.key, nil)
		resp.JSON(t, &m)
		require.Equal(t, "code 1111", m.Subject)
	})

	t.Run("Timeout204", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		r := e.b.createReceiver(t, e.key, nil)
		res := e.startWait(t, receiverPath(r.ID, "/wait?timeout=1&subject_contains=never"))
		e.send(t, r.Address, "Subject: something else", "x")
		got := <-res
		require.Equal(t, http.StatusNoContent, got.resp.Status, "%s", got.resp.Body)
		require.GreaterOrEqual(t, got.elapsed, time.Second)
	})

	t.Run("ExpiryDuringWait410", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		r := e.b.createReceiver(t, e.key, nil)
		res := e.startWait(t, receiverPath(r.ID, "/wait?timeout=30&subject_contains=never"))
		_, err := e.pool.Exec(context.Background(), "UPDATE receivers SET expires_at = now() + interval '500 milliseconds' WHERE id = $1", r.ID)
		require.NoError(t, err)
		e.send(t, r.Address, "Subject: not it", "x") // wakes the wait, which sees the new expiry
		got := <-res
		require.Equal(t, http.StatusGone, got.resp.Status, "%s", got.resp.Body)
		require.Contains(t, got.resp.Detail(t), "expired")
	})

	t.Run("LabelWide", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		a := e.b.createReceiver(t, e.key, map[string]any{"label": "signup-qa"})
		b := e.b.createReceiver(t, e.key, map[string]any{"label": "signup-qa"})
		other := e.b.createReceiver(t, e.key, map[string]any{"label": "other"})
		e.send(t, a.Address, "Subject: reset before", "stored before the wait")
		res := e.startWait(t, "/api/accounts/me/receivers/wait?timeout=30&label=signup-qa&subject_contains=reset&count=2")
		e.send(t, other.Address, "Subject: reset elsewhere", "another label")
		e.send(t, b.Address, "Subject: reset on b", "x")
		e.send(t, a.Address, "Subject: welcome on a", "x")
		e.send(t, a.Address, "Subject: reset on a", "x")
		m := okMessage(t, <-res)
		require.Len(t, m.Messages, 2)
		require.Equal(t, "reset on b", m.Messages[0].Subject)
		require.Equal(t, b.ID, m.Messages[0].ReceiverID)
		require.Equal(t, "reset on a", m.Messages[1].Subject)
		require.Equal(t, a.ID, m.Messages[1].ReceiverID)

		resp := e.b.do(t, "GET", "/api/accounts/me/receivers/wait?timeout=1&label=nobody", e.key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status, "%s", resp.Body)
		require.Contains(t, resp.Detail(t), "label")
	})

	t.Run("BadValues", func(t *testing.T) {
		t.Parallel()
		e := newMatchEnv(t)
		r := e.b.createReceiver(t, e.key, nil)
		long := strings.Repeat("x", receivers.MaxFilterChars+1)
		tooMany := url.Values{}
		for range receivers.MaxHeaderFilters + 1 {
			tooMany.Add("header", "X-A:b")
		}
		for q, field := range map[string]string{
			"count=0": "count", "count=51": "count", "subject_contains=" + long: "subject_contains",
			"from=" + long: "from", "body_contains=" + long: "body_contains", tooMany.Encode(): "header",
			"header=no-colon": "header", "header=Bad+Name:x": "header", "header=:x": "header",
		} {
			resp := e.b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=1&"+q), e.key, nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s: %s", q, resp.Body)
			require.Contains(t, resp.Detail(t)+string(resp.Body), field, q)
		}
		for _, q := range []string{"since=yesterday", "count=x"} {
			resp := e.b.do(t, "GET", receiverPath(r.ID, "/wait?timeout=1&"+q), e.key, nil)
			require.Equal(t, http.StatusBadRequest, resp.Status, "%s: %s", q, resp.Body)
			resp.Detail(t)
		}
		resp := e.b.do(t, "GET", "/api/accounts/me/receivers/wait?timeout=1", e.key, nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "label is required: %s", resp.Body)
	})
}

// TestReceiverWaitFiltersDocumented: both waits declare the filters with
// internal/receivers' bounds (the validate tags repeat the numbers; this
// holds them to the package's).
func TestReceiverWaitFiltersDocumented(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.do(t, "GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string         `json:"name"`
				In     string         `json:"in"`
				Schema map[string]any `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	resp.JSON(t, &doc)
	for _, path := range []string{"/api/accounts/me/receivers/{id}/wait", "/api/accounts/me/receivers/wait"} {
		schemas := map[string]map[string]any{}
		for _, p := range doc.Paths[path]["get"].Parameters {
			if p.In == "query" {
				schemas[p.Name] = p.Schema
			}
		}
		for _, name := range []string{"from", "to", "subject_contains", "body_contains"} {
			require.EqualValues(t, receivers.MaxFilterChars, schemas[name]["maxLength"], "%s %s", path, name)
		}
		require.Equal(t, "array", schemas["header"]["type"], path)
		require.EqualValues(t, receivers.MaxHeaderFilters, schemas["header"]["maxItems"], path)
		require.EqualValues(t, receivers.MaxHeaderFilterChars, schemas["header"]["items"].(map[string]any)["maxLength"], path)
		require.EqualValues(t, receivers.MaxCount, schemas["count"]["maximum"], path)
		require.EqualValues(t, 1, schemas["count"]["minimum"], path)
		require.Equal(t, "date-time", schemas["since"]["format"], path)
	}
}
