package receivers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/inbound"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func sample() *receivers.Message {
	return &receivers.Message{
		Sender: "bounce+123@mailer.example", Subject: "Réinitialisez your PASSWORD",
		TextBody: "Your code is 123456", HTMLBody: "<p>Click <a href=x>HERE</a></p>",
		ReceivedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Details: receivers.Details{
			From:       inbound.Address{Name: "Shop", Address: "No-Reply@Shop.Example"},
			To:         []inbound.Address{{Address: "qa-1@inbound.test"}},
			Cc:         []inbound.Address{{Address: "cc@Other.Example"}},
			Recipients: []string{"qa-2@inbound.test"},
			Headers:    []inbound.Header{{Name: "X-Campaign", Value: "signup"}, {Name: "List-Id", Value: " <l.example> "}},
		},
	}
}

func TestMatchRules(t *testing.T) {
	t.Parallel()
	since := func(d time.Duration) *time.Time { v := sample().ReceivedAt.Add(d); return &v }
	for name, c := range map[string]struct {
		m    receivers.Match
		want bool
	}{
		"empty matches all":                 {receivers.Match{}, true},
		"from: domain case-insensitive":     {receivers.Match{From: "No-Reply@shop.EXAMPLE"}, true},
		"from: local part exact":            {receivers.Match{From: "no-reply@shop.example"}, false},
		"from: whole domain":                {receivers.Match{From: "@SHOP.example"}, true},
		"from: not the envelope sender":     {receivers.Match{From: "bounce+123@mailer.example"}, false},
		"to: a To address":                  {receivers.Match{To: "qa-1@INBOUND.test"}, true},
		"to: a Cc address":                  {receivers.Match{To: "cc@other.example"}, true},
		"to: an envelope recipient":         {receivers.Match{To: "qa-2@inbound.test"}, true},
		"to: another":                       {receivers.Match{To: "qa-3@inbound.test"}, false},
		"subject: case-insensitive":         {receivers.Match{SubjectContains: "password"}, true},
		"subject: non-ASCII folding":        {receivers.Match{SubjectContains: "RÉINITIALISEZ"}, true},
		"subject: absent":                   {receivers.Match{SubjectContains: "welcome"}, false},
		"body: text part":                   {receivers.Match{BodyContains: "CODE IS"}, true},
		"body: html part, markup included":  {receivers.Match{BodyContains: "<a href=x>here"}, true},
		"body: absent":                      {receivers.Match{BodyContains: "unsubscribe"}, false},
		"header: name case-insensitive":     {receivers.Match{Headers: []receivers.HeaderFilter{{Name: "x-campaign", Value: "signup"}}}, true},
		"header: value exact":               {receivers.Match{Headers: []receivers.HeaderFilter{{Name: "X-Campaign", Value: "SIGNUP"}}}, false},
		"header: value trimmed":             {receivers.Match{Headers: []receivers.HeaderFilter{{Name: "List-Id", Value: "<l.example>"}}}, true},
		"header: present":                   {receivers.Match{Headers: []receivers.HeaderFilter{{Name: "list-id"}}}, true},
		"header: absent":                    {receivers.Match{Headers: []receivers.HeaderFilter{{Name: "X-Missing"}}}, false},
		"header: every filter must pass":    {receivers.Match{Headers: []receivers.HeaderFilter{{Name: "List-Id"}, {Name: "X-Missing"}}}, false},
		"since: at the message":             {receivers.Match{Since: since(0)}, true},
		"since: after the message":          {receivers.Match{Since: since(time.Nanosecond)}, false},
		"all filters: one failing fails it": {receivers.Match{SubjectContains: "password", BodyContains: "nope"}, false},
	} {
		require.Equal(t, c.want, c.m.Matches(sample()), name)
	}

	// body_contains looks at a bounded prefix of each part.
	m := sample()
	m.TextBody = strings.Repeat("a", receivers.BodyExaminedBytes) + "needle"
	require.False(t, (&receivers.Match{BodyContains: "needle"}).Matches(m))
	m.TextBody = strings.Repeat("a", receivers.BodyExaminedBytes-6) + "needle"
	require.True(t, (&receivers.Match{BodyContains: "needle"}).Matches(m))

	// An SMS: From is the sender's number, compared exactly.
	sms := &receivers.Message{Details: receivers.Details{From: inbound.Address{Address: "+15550001111"}}}
	require.True(t, (&receivers.Match{From: "+15550001111"}).Matches(sms))
	require.False(t, (&receivers.Match{From: "+15550001112"}).Matches(sms))
}

func TestMatchBounds(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", receivers.MaxFilterChars+1)
	headers := make([]receivers.HeaderFilter, receivers.MaxHeaderFilters+1)
	for i := range headers {
		headers[i] = receivers.HeaderFilter{Name: "X-A"}
	}
	for param, m := range map[string]receivers.Match{
		"from": {From: long}, "to": {To: long}, "subject_contains": {SubjectContains: long},
		"body_contains": {BodyContains: long}, "header": {Headers: headers}, "count": {Count: receivers.MaxCount + 1},
	} {
		var fe *receivers.FilterError
		require.True(t, errors.As(m.Validate(), &fe), param)
		require.Equal(t, param, fe.Param)
	}
	ok := receivers.Match{From: strings.Repeat("é", receivers.MaxFilterChars), Count: receivers.MaxCount}
	require.NoError(t, ok.Validate())

	for _, bad := range []string{"no colon", ":value", "Bad Name:v", "Ünï:v", strings.Repeat("X", receivers.MaxHeaderNameChars+1) + ":v"} {
		_, err := receivers.ParseHeaderFilter(bad)
		var fe *receivers.FilterError
		require.True(t, errors.As(err, &fe), bad)
	}
	h, err := receivers.ParseHeaderFilter(" X-Campaign :  signup  ")
	require.NoError(t, err)
	require.Equal(t, receivers.HeaderFilter{Name: "X-Campaign", Value: "signup"}, h)
	h, err = receivers.ParseHeaderFilter("List-Id:")
	require.NoError(t, err)
	require.Equal(t, receivers.HeaderFilter{Name: "List-Id"}, h)
}

func FuzzParseHeaderFilter(f *testing.F) {
	for _, s := range []string{"X-Campaign:signup", "List-Id:", ":", "a:b:c", " x : y ", "Ü:v", strings.Repeat("x", 400)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := receivers.ParseHeaderFilter(s)
		if err != nil {
			return
		}
		require.NotEmpty(t, h.Name)
		require.LessOrEqual(t, len(h.Name), receivers.MaxHeaderNameChars)
		require.NotContains(t, h.Name, ":")
		m := receivers.Match{Headers: []receivers.HeaderFilter{h}}
		if utf8.RuneCountInString(h.Value) <= receivers.MaxFilterChars {
			require.NoError(t, m.Validate())
		}
		msg := &receivers.Message{Details: receivers.Details{Headers: []inbound.Header{{Name: strings.ToUpper(h.Name), Value: h.Value}}}}
		require.True(t, m.Matches(msg), "a header equal to the filter matches it")
	})
}

func FuzzMatchContains(f *testing.F) {
	f.Add("Your Password reset", "password")
	f.Add("ÉCOLE", "école")
	f.Add("\xff\xfeabc", "ABC")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, s, sub string) {
		if sub == "" || len(s) > 4096 || len(sub) > 256 {
			return
		}
		got := (&receivers.Match{SubjectContains: sub}).Matches(&receivers.Message{Subject: s})
		if strings.Contains(s, sub) {
			require.True(t, got, "a substring is contained")
		}
		if isASCII(s) && isASCII(sub) {
			require.Equal(t, strings.Contains(strings.ToLower(s), strings.ToLower(sub)), got)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func TestHubWaiterOfSeveralReceivers(t *testing.T) {
	t.Parallel()
	hub := receivers.NewHub(nil, nil)
	a, b := uuid.New(), uuid.New()
	w, err := hub.Register(a, b)
	require.NoError(t, err)
	require.Equal(t, 1, hub.Len(), "one waiter however many receivers it watches")
	hub.Wake(b)
	requireWoken(t, w)
	hub.Wake(a, b)
	requireWoken(t, w)
	requireNotWoken(t, w, "wake-ups coalesce")
	w.Close()
	w.Close()
	require.Zero(t, hub.Len())
	hub.Wake(a)
	requireNotWoken(t, w)
}

// TestWaitMatchingCommitted: a matching wait on a committed database, woken
// by the LISTEN connection: count=2 answers the two matching messages that
// arrive after the wait started, and skips the one stored before and the
// one that does not match.
func TestWaitMatchingCommitted(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	hub := receivers.NewHub(receivers.ConnectURL(url), nil)
	stop := runHub(t, hub)
	t.Cleanup(func() { _ = stop() })
	requireReady(t, hub)
	ctx := context.Background()
	account := testfactory.Account(t, pool)
	r := insertReceiver(t, pool, account, "email", newAddress(), time.Now().Add(time.Hour))
	store := newStore(t, pool, time.Now())
	store.Now = nil
	deliver := func(subject string) {
		_, err := store.DeliverEmail(ctx, receivers.EmailDelivery{
			Raw: []byte("From: a@example.com\r\nSubject: " + subject + "\r\n\r\nbody\r\n"), Recipients: []string{r.Address},
		})
		require.NoError(t, err)
	}
	deliver("code before")

	type result struct {
		msgs []receivers.Message
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := receivers.WaitMatching(ctx, pool, hub, receivers.MatchRequest{
			AccountID: account, ReceiverID: r.ID, Match: receivers.Match{SubjectContains: "CODE", Count: 2},
			Timeout: waitTimeout, Now: time.Now,
		})
		done <- result{msgs, err}
	}()
	require.Eventually(t, func() bool { return hub.Len() == 1 }, waitTimeout, time.Millisecond)
	deliver("code one")
	deliver("welcome")
	deliver("code two")
	res := <-done
	require.NoError(t, res.err)
	require.Len(t, res.msgs, 2)
	require.Equal(t, "code one", res.msgs[0].Subject)
	require.Equal(t, "code two", res.msgs[1].Subject)
	require.Equal(t, "body", strings.TrimSpace(res.msgs[0].TextBody), "the answer is read whole")
	require.Zero(t, hub.Len())

	// A look-back (since) finds a message stored before the wait; its body,
	// longer than what matching reads, is answered whole.
	big := strings.Repeat("a", receivers.BodyExaminedBytes+100) + " tail"
	before := time.Now().Add(-time.Minute)
	_, err := store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: []byte("From: a@example.com\r\nSubject: big one\r\n\r\n" + big + "\r\n"), Recipients: []string{r.Address},
	})
	require.NoError(t, err)
	msgs, err := receivers.WaitMatching(ctx, pool, hub, receivers.MatchRequest{
		AccountID: account, ReceiverID: r.ID, Match: receivers.Match{SubjectContains: "big", Since: &before},
		Timeout: waitTimeout, Now: time.Now,
	})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0].TextBody, "tail", "read whole")

	// A label-wide wait on a label nobody carries.
	label := "nobody"
	_, err = receivers.WaitMatching(ctx, pool, hub, receivers.MatchRequest{AccountID: account, Label: &label, Timeout: time.Second, Now: time.Now})
	require.ErrorIs(t, err, receivers.ErrNoLabelledReceiver)
}
