package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/jobs"
)

// testStripeSecret signs Stripe webhooks in tests.
const testStripeSecret = "whsec_test_6f1d2c3b4a5e6f7a8b9c0d1e2f3a4b5c"

var stripeSeq atomic.Int64

// stripeID makes a unique Stripe-style id (evt_, sub_, cus_, in_...).
func stripeID(prefix string) string {
	return fmt.Sprintf("%s_1Q%dTestMw%d", prefix, time.Now().UnixNano()%1e9, stripeSeq.Add(1))
}

// stripeEvent builds an event object as Stripe documents it
// (https://docs.stripe.com/api/events/object).
func stripeEvent(id, typ string, created time.Time, object map[string]any) []byte {
	ev := map[string]any{
		"id": id, "object": "event", "api_version": "2025-09-30.clover", "created": created.Unix(),
		"data":     map[string]any{"object": object, "previous_attributes": map[string]any{}},
		"livemode": false, "pending_webhooks": 1, "type": typ,
		"request": map[string]any{"id": "req_" + strings.TrimPrefix(id, "evt_"), "idempotency_key": uuid.NewString()},
	}
	b, _ := json.Marshal(ev)
	return b
}

// stripeSubscription is a subscription object
// (https://docs.stripe.com/api/subscriptions/object) with one item.
func stripeSubscription(id, customer, status, price string) map[string]any {
	now := time.Now().Unix()
	return map[string]any{
		"id": id, "object": "subscription", "customer": customer, "status": status, "currency": "usd",
		"created": now - 86400, "start_date": now - 86400, "cancel_at_period_end": false, "collection_method": "charge_automatically",
		"livemode": false, "metadata": map[string]any{},
		"items": map[string]any{"object": "list", "has_more": false, "url": "/v1/subscription_items?subscription=" + id,
			"data": []any{map[string]any{
				"id": "si_" + strings.TrimPrefix(id, "sub_"), "object": "subscription_item", "quantity": 1, "subscription": id,
				"current_period_start": now - 86400, "current_period_end": now + 29*86400,
				"price": map[string]any{"id": price, "object": "price", "active": true, "currency": "usd", "product": "prod_MwPlan",
					"unit_amount": 2900, "type": "recurring", "recurring": map[string]any{"interval": "month", "interval_count": 1}},
			}}},
	}
}

func stripeCheckoutSession(accountID, customer, sub string) map[string]any {
	return map[string]any{
		"id": stripeID("cs_test"), "object": "checkout.session", "client_reference_id": accountID, "customer": customer,
		"subscription": sub, "mode": "subscription", "status": "complete", "payment_status": "paid",
		"amount_total": 2900, "currency": "usd", "livemode": false, "metadata": map[string]any{},
	}
}

func stripeInvoice(customer, sub string, attempt int) map[string]any {
	return map[string]any{
		"id": stripeID("in"), "object": "invoice", "customer": customer, "subscription": sub, "status": "open",
		"amount_due": 2900, "amount_paid": 0, "amount_remaining": 2900, "currency": "usd", "attempt_count": attempt,
		"attempted": true, "billing_reason": "subscription_cycle", "livemode": false,
		"parent": map[string]any{"type": "subscription_details", "subscription_details": map[string]any{"subscription": sub}},
	}
}

func signStripe(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

// postStripe sends a Stripe webhook with the given Stripe-Signature.
func (b *testBundle) postStripe(t *testing.T, payload []byte, sig string) response {
	t.Helper()
	req := httptest.NewRequest("POST", "/api/webhooks/payments/stripe", strings.NewReader(string(payload)))
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set("Stripe-Signature", sig)
	}
	resp, err := b.srv.App().Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: body}
	checkConformance(t, b.srv, "POST", "/api/webhooks/payments/stripe", "", payload, out)
	return out
}

// sendStripe signs and posts an event and returns the ingress result.
func (b *testBundle) sendStripe(t *testing.T, payload []byte) api.StripeIngressResult {
	t.Helper()
	resp := b.postStripe(t, payload, signStripe(payload, testStripeSecret, time.Now()))
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var out api.StripeIngressResult
	resp.JSON(t, &out)
	return out
}

var testPrices = plans.PriceMap{"price_mw_pro": plans.Pro, "price_mw_business": plans.Business}

// applyStripe runs what the stripe_event job runs, on the test's database.
func (b *testBundle) applyStripe(t *testing.T, eventID string, now time.Time) string {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	a := &billing.Applier{Emitter: &events.Emitter{River: client}, Prices: testPrices, Grace: 7 * 24 * time.Hour, Default: b.defaultPlan}
	outcome, err := dbutil.WithTxV(context.Background(), b.db, func(ctx context.Context, tx dbutil.Tx) (string, error) {
		return a.Apply(ctx, tx, eventID, now)
	})
	require.NoError(t, err)
	return outcome
}

// subscribePro links a Stripe customer to the account and subscribes it
// to pro, an hour ago; it returns the customer, the subscription and when.
func (b *testBundle) subscribePro(t *testing.T, accountID string) (customer, sub string, at time.Time) {
	t.Helper()
	customer, sub = stripeID("cus"), stripeID("sub")
	at = time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, ev := range [][]byte{
		stripeEvent(stripeID("evt"), "checkout.session.completed", at, stripeCheckoutSession(accountID, customer, sub)),
		stripeEvent(stripeID("evt"), "customer.subscription.created", at.Add(time.Second), stripeSubscription(sub, customer, "active", "price_mw_pro")),
	} {
		require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, b.sendStripe(t, ev).EventID, at))
	}
	return customer, sub, at
}

// expireGrace runs what the billing_grace job runs at now, with the
// default plan def, and returns how many accounts it moved.
func (b *testBundle) expireGrace(t *testing.T, def string, now time.Time) int {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
	require.NoError(t, err)
	n, err := dbutil.WithTxV(context.Background(), b.db, func(ctx context.Context, tx dbutil.Tx) (int, error) {
		return billing.ExpireGrace(ctx, tx, &events.Emitter{River: client}, def, now, 100)
	})
	require.NoError(t, err)
	return n
}

func (b *testBundle) plan(t *testing.T, key string) api.AccountPlan {
	t.Helper()
	resp := b.do(t, "GET", "/api/accounts/me/plan", key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var p api.AccountPlan
	resp.JSON(t, &p)
	return p
}

func (b *testBundle) eventsOfType(t *testing.T, accountID, typ string) []json.RawMessage {
	t.Helper()
	rows, err := b.db.Query(context.Background(), "SELECT payload FROM events WHERE account_id = $1 AND event_type = $2 ORDER BY id", accountID, typ)
	require.NoError(t, err)
	defer rows.Close()
	var out []json.RawMessage
	for rows.Next() {
		var p json.RawMessage
		require.NoError(t, rows.Scan(&p))
		out = append(out, p)
	}
	require.NoError(t, rows.Err())
	return out
}

func withStripe(o *setupOpts) {
	o.deps = func(d *api.Deps) { d.StripeWebhookSecret = testStripeSecret; d.EventRetentionDays = 90 }
}

func TestStripeWebhookSignature(t *testing.T) {
	t.Parallel()
	b := setup(t, withStripe)
	payload := stripeEvent(stripeID("evt"), "customer.created", time.Now(), map[string]any{"id": stripeID("cus"), "object": "customer"})

	t.Run("BadSignatureIs401WithDetail", func(t *testing.T) {
		for _, tc := range []struct{ name, sig, detail string }{
			{"Missing", "", "missing"},
			{"Malformed", "t=1,v1", "malformed"},
			{"WrongSecret", signStripe(payload, "whsec_other", time.Now()), "no v1 signature matches"},
			{"TooOld", signStripe(payload, testStripeSecret, time.Now().Add(-301*time.Second)), "more than 300 seconds old"},
			{"V0Only", strings.Replace(signStripe(payload, testStripeSecret, time.Now()), "v1=", "v0=", 1), "no v1 signature matches"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := b.postStripe(t, payload, tc.sig)
				require.Equal(t, http.StatusUnauthorized, resp.Status, "%s", resp.Body)
				require.Contains(t, resp.Detail(t), tc.detail)
			})
		}
		tampered := []byte(strings.Replace(string(payload), "customer.created", "customer.updated", 1))
		resp := b.postStripe(t, tampered, signStripe(payload, testStripeSecret, time.Now()))
		require.Equal(t, http.StatusUnauthorized, resp.Status, "a body changed after signing")
		var n int
		require.NoError(t, b.db.QueryRow(context.Background(), "SELECT count(*) FROM stripe_events").Scan(&n))
		require.Zero(t, n, "nothing unverified is stored")
	})

	t.Run("AnyOfSeveralV1Signatures", func(t *testing.T) {
		now := time.Now()
		good := webhook.ComputeSignature(now, payload, testStripeSecret)
		old := webhook.ComputeSignature(now, payload, "whsec_rolled_away")
		sig := fmt.Sprintf("t=%d,v1=%x,v1=%x,v0=%x", now.Unix(), old, good, old)
		resp := b.postStripe(t, payload, sig)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	})

	t.Run("NotAnEventIs400", func(t *testing.T) {
		body := []byte(`{"id":"cus_1","object":"customer"}`)
		resp := b.postStripe(t, body, signStripe(body, testStripeSecret, time.Now()))
		require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
	})

	t.Run("UnconfiguredIs503", func(t *testing.T) {
		plain := setup(t)
		resp := plain.postStripe(t, payload, signStripe(payload, testStripeSecret, time.Now()))
		require.Equal(t, http.StatusServiceUnavailable, resp.Status)
		require.Contains(t, resp.Detail(t), "STRIPE_WEBHOOK_SECRET")
	})
}

func TestStripeSubscriptionMovesPlan(t *testing.T) {
	t.Parallel()
	b := setup(t, withStripe)
	acct := b.createAccount(t)
	other := b.createAccount(t)
	ctx := context.Background()
	customer, sub := stripeID("cus"), stripeID("sub")
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)

	require.Equal(t, plans.Free, b.plan(t, acct.Key).Plan, "a new account is on free")

	// Checkout links the customer to the account.
	checkout := stripeEvent(stripeID("evt"), "checkout.session.completed", t0, stripeCheckoutSession(acct.ID, customer, sub))
	res := b.sendStripe(t, checkout)
	require.False(t, res.Duplicate)
	var njobs int
	require.NoError(t, b.db.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'stripe_event' AND args->>'event_id' = $1", res.EventID).Scan(&njobs))
	require.Equal(t, 1, njobs, "the event's job is inserted with it")
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, res.EventID, time.Now()))
	p := b.plan(t, acct.Key)
	require.Equal(t, customer, *p.Billing.StripeCustomerID)
	require.Equal(t, plans.Free, p.Plan, "a checkout alone changes no plan")

	// A signed customer.subscription.updated moves the plan.
	updated := stripeEvent(stripeID("evt"), "customer.subscription.updated", t0.Add(10*time.Second),
		stripeSubscription(sub, customer, "active", "price_mw_pro"))
	upd := b.sendStripe(t, updated)
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, upd.EventID, time.Now()))
	p = b.plan(t, acct.Key)
	require.Equal(t, plans.Pro, p.Plan)
	require.Equal(t, 50, *p.Limits.Domains)
	require.Equal(t, "active", p.Billing.Status)
	require.Equal(t, sub, *p.Billing.StripeSubscriptionID)
	changed := b.eventsOfType(t, acct.ID, events.TypePlanChanged)
	require.Len(t, changed, 1)
	require.JSONEq(t, fmt.Sprintf(`{"previous_plan":"free","plan":"pro","reason":"stripe_subscription","stripe_event_id":%q,"stripe_subscription_id":%q}`,
		upd.EventID, sub), string(changed[0]))
	require.Equal(t, plans.Free, b.plan(t, other.Key).Plan, "another account is untouched")

	t.Run("ReplayIsIgnored", func(t *testing.T) {
		again := b.sendStripe(t, updated)
		require.True(t, again.Duplicate)
		require.Equal(t, upd.EventID, again.EventID)
		require.NoError(t, b.db.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'stripe_event' AND args->>'event_id' = $1", upd.EventID).Scan(&njobs))
		require.Equal(t, 1, njobs, "a replay inserts no second job")
		// A re-run of the job (River UI, rescuer) applies nothing twice.
		require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, upd.EventID, time.Now()))
		require.Len(t, b.eventsOfType(t, acct.ID, events.TypePlanChanged), 1)
	})

	t.Run("OlderEventAfterNewerChangesNothing", func(t *testing.T) {
		// Stripe created this one before the update above; it arrives after.
		older := stripeEvent(stripeID("evt"), "customer.subscription.created", t0.Add(5*time.Second),
			stripeSubscription(sub, customer, "incomplete", "price_mw_business"))
		res := b.sendStripe(t, older)
		require.False(t, res.Duplicate)
		require.Equal(t, billing.OutcomeStale, b.applyStripe(t, res.EventID, time.Now()))
		p := b.plan(t, acct.Key)
		require.Equal(t, plans.Pro, p.Plan)
		require.Equal(t, "active", *p.Billing.StripeSubscriptionStatus)
		require.Len(t, b.eventsOfType(t, acct.ID, events.TypePlanChanged), 1)
	})

	t.Run("UpgradeThenDelete", func(t *testing.T) {
		up := b.sendStripe(t, stripeEvent(stripeID("evt"), "customer.subscription.updated", t0.Add(20*time.Second),
			stripeSubscription(sub, customer, "active", "price_mw_business")))
		del := b.sendStripe(t, stripeEvent(stripeID("evt"), "customer.subscription.deleted", t0.Add(30*time.Second),
			stripeSubscription(sub, customer, "canceled", "price_mw_business")))
		// Applied in the reverse order of their creation: the deletion wins.
		require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, del.EventID, time.Now()))
		require.Equal(t, billing.OutcomeStale, b.applyStripe(t, up.EventID, time.Now()))
		p := b.plan(t, acct.Key)
		require.Equal(t, plans.Free, p.Plan)
		require.Equal(t, "canceled", p.Billing.Status)
	})

	t.Run("UnlinkedCustomerWaits", func(t *testing.T) {
		res := b.sendStripe(t, stripeEvent(stripeID("evt"), "customer.subscription.created", time.Now(),
			stripeSubscription(stripeID("sub"), stripeID("cus"), "active", "price_mw_pro")))
		client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, jobs.Options{})
		require.NoError(t, err)
		a := &billing.Applier{Emitter: &events.Emitter{River: client}, Prices: testPrices}
		err = dbutil.WithTx(ctx, b.db, func(ctx context.Context, tx dbutil.Tx) error {
			_, err := a.Apply(ctx, tx, res.EventID, time.Now())
			return err
		})
		require.ErrorIs(t, err, billing.ErrNoAccount)
	})
}

func TestPaymentFailedGraceThenDowngrade(t *testing.T) {
	t.Parallel()
	b := setup(t, withStripe)
	acct := b.createAccount(t)
	ctx := context.Background()
	customer, sub, t0 := b.subscribePro(t, acct.ID)
	require.Equal(t, plans.Pro, b.plan(t, acct.Key).Plan)

	failedAt := t0.Add(time.Minute)
	failed := b.sendStripe(t, stripeEvent(stripeID("evt"), "invoice.payment_failed", failedAt, stripeInvoice(customer, sub, 1)))
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, failed.EventID, failedAt))
	p := b.plan(t, acct.Key)
	require.Equal(t, plans.Pro, p.Plan, "the plan holds during the grace period")
	require.Equal(t, "past_due", p.Billing.Status)
	graceUntil := failedAt.Add(7 * 24 * time.Hour)
	require.True(t, graceUntil.Equal(*p.Billing.GraceUntil), "grace until %s, got %s", graceUntil, p.Billing.GraceUntil)
	pf := b.eventsOfType(t, acct.ID, events.TypePaymentFailed)
	require.Len(t, pf, 1)
	var pfp map[string]any
	require.NoError(t, json.Unmarshal(pf[0], &pfp))
	require.Equal(t, "pro", pfp["plan"])
	require.Equal(t, graceUntil.UTC().Format(time.RFC3339), pfp["grace_until"])
	var sev string
	require.NoError(t, b.db.QueryRow(ctx, "SELECT severity FROM events WHERE account_id = $1 AND event_type = 'payment_failed'", acct.ID).Scan(&sev))
	require.Equal(t, "critical", sev, "a failed payment is an alert")

	// A second failure (Stripe's retry) keeps the first deadline.
	retry := b.sendStripe(t, stripeEvent(stripeID("evt"), "invoice.payment_failed", failedAt.Add(3*24*time.Hour), stripeInvoice(customer, sub, 2)))
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, retry.EventID, failedAt.Add(3*24*time.Hour)))
	require.True(t, graceUntil.Equal(*b.plan(t, acct.Key).Billing.GraceUntil))

	expire := func(now time.Time) int { return b.expireGrace(t, plans.Free, now) }
	require.Zero(t, expire(graceUntil.Add(-time.Minute)), "nothing before the deadline")
	require.Equal(t, plans.Pro, b.plan(t, acct.Key).Plan)
	require.Equal(t, 1, expire(graceUntil.Add(time.Minute)))
	require.Zero(t, expire(graceUntil.Add(2*time.Minute)), "a second run has nothing to do")
	p = b.plan(t, acct.Key)
	require.Equal(t, plans.Free, p.Plan)
	require.Equal(t, "past_due", p.Billing.Status)
	changed := b.eventsOfType(t, acct.ID, events.TypePlanChanged)
	require.JSONEq(t, `{"previous_plan":"pro","plan":"free","reason":"grace_expired"}`, string(changed[len(changed)-1]))

	// A subscription update while still unpaid does not bring pro back.
	upd := b.sendStripe(t, stripeEvent(stripeID("evt"), "customer.subscription.updated", graceUntil.Add(time.Hour), stripeSubscription(sub, customer, "past_due", "price_mw_pro")))
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, upd.EventID, graceUntil.Add(time.Hour)))
	require.Equal(t, plans.Free, b.plan(t, acct.Key).Plan)

	// Payment restores the plan; a late, older failure changes nothing.
	paid := b.sendStripe(t, stripeEvent(stripeID("evt"), "invoice.paid", graceUntil.Add(2*time.Hour), stripeInvoice(customer, sub, 3)))
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, paid.EventID, graceUntil.Add(2*time.Hour)))
	p = b.plan(t, acct.Key)
	require.Equal(t, plans.Pro, p.Plan)
	require.Equal(t, "active", p.Billing.Status)
	require.Nil(t, p.Billing.GraceUntil)
	late := b.sendStripe(t, stripeEvent(stripeID("evt"), "invoice.payment_failed", failedAt.Add(4*24*time.Hour), stripeInvoice(customer, sub, 2)))
	require.Equal(t, billing.OutcomeStale, b.applyStripe(t, late.EventID, graceUntil.Add(3*time.Hour)))
	require.Equal(t, "active", b.plan(t, acct.Key).Billing.Status)
}

func TestPlanLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, withStripe)
	admin, acct := b.createAccount(t), b.createAccount(t)
	b.makeAdmin(t, admin)
	free, _ := plans.Lookup(plans.Free)

	for i := range free.Domains {
		resp := b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": fmt.Sprintf("limit%d.example.com", i)})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	resp := b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": "one-more.example.com"})
	require.Equal(t, http.StatusPaymentRequired, resp.Status, "%s", resp.Body)
	detail := resp.Detail(t)
	require.Contains(t, detail, `limit "domains"`)
	require.Contains(t, detail, "the free plan allows 5 monitored domains")
	require.Contains(t, detail, "the account has 5")
	p := b.plan(t, acct.Key)
	require.Equal(t, int64(free.Domains), p.Usage.Domains)
	require.Equal(t, free.Domains, *p.Limits.Domains)
	require.Equal(t, 7, p.Limits.EventRetentionDays)

	for i := range free.Subscriptions {
		resp := b.do(t, "POST", "/api/accounts/me/event-subscriptions", acct.Key, map[string]any{"url": fmt.Sprintf("http://127.0.0.1:9/hook%d", i)})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	resp = b.do(t, "POST", "/api/accounts/me/event-subscriptions", acct.Key, map[string]any{"url": "http://127.0.0.1:9/more"})
	require.Equal(t, http.StatusPaymentRequired, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), `limit "subscriptions"`)

	// Upgrading lifts the limits.
	resp = b.do(t, "PUT", "/api/admin/accounts/"+acct.ID+"/plan", admin.Key, map[string]any{"plan": "pro"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp = b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": "one-more.example.com"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	resp = b.do(t, "POST", "/api/accounts/me/event-subscriptions", acct.Key, map[string]any{"url": "http://127.0.0.1:9/more"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	p = b.plan(t, acct.Key)
	require.Equal(t, plans.Pro, p.Plan)
	require.Equal(t, int64(6), p.Usage.Domains)
	require.Equal(t, 30, p.Limits.EventRetentionDays)

	// Downgrading keeps what exists but refuses more.
	resp = b.do(t, "PUT", "/api/admin/accounts/"+acct.ID+"/plan", admin.Key, map[string]any{"plan": "free"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp = b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": "again.example.com"})
	require.Equal(t, http.StatusPaymentRequired, resp.Status)
	require.Contains(t, resp.Detail(t), "the account has 6")
}

func TestPlanLimitReceivers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	free, _ := plans.Lookup(plans.Free)
	for i := range free.Receivers {
		resp := b.do(t, "POST", "/api/accounts/me/receivers", acct.Key, map[string]any{"label": fmt.Sprint("r", i)})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	resp := b.do(t, "POST", "/api/accounts/me/receivers", acct.Key, map[string]any{"label": "one more"})
	require.Equal(t, http.StatusPaymentRequired, resp.Status, "%s", resp.Body)
	require.Contains(t, resp.Detail(t), `live receivers (limit "receivers")`)
	// Expired receivers do not count.
	_, err := b.db.Exec(context.Background(), "UPDATE receivers SET expires_at = now() - interval '1 minute' WHERE id IN (SELECT id FROM receivers WHERE account_id = $1 LIMIT 1)", acct.ID)
	require.NoError(t, err)
	resp = b.do(t, "POST", "/api/accounts/me/receivers", acct.Key, map[string]any{"label": "after expiry"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
}

// TestPlanLimitConcurrentCreates: creates racing for the last free slot
// are counted one after the other (the account row is locked), so exactly
// one wins.
func TestPlanLimitConcurrentCreates(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	acct := b.createAccount(t)
	free, _ := plans.Lookup(plans.Free)
	for i := range free.Domains - 1 {
		resp := b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": fmt.Sprintf("race%d.example.com", i)})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	const racers = 6
	var wg sync.WaitGroup
	statuses := make([]int, racers)
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := httptest.NewRequest("POST", "/api/accounts/me/domains", strings.NewReader(fmt.Sprintf(`{"domain":"racer%d.example.com"}`, i)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+acct.Key)
			resp, err := b.srv.App().Test(req, -1)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for _, s := range statuses {
		if s == http.StatusCreated {
			created++
		} else {
			require.Equal(t, http.StatusPaymentRequired, s)
		}
	}
	require.Equal(t, 1, created, "statuses %v", statuses)
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM domains WHERE account_id = $1", acct.ID).Scan(&n))
	require.Equal(t, free.Domains, n)
}

func TestAdminSetPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin, target, bystander := b.createAccount(t), b.createAccount(t), b.createAccount(t)
	b.makeAdmin(t, admin)
	path := "/api/admin/accounts/" + target.ID + "/plan"

	require.Equal(t, http.StatusNotFound, b.do(t, "PUT", path, bystander.Key, map[string]any{"plan": "business"}).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "PUT", path, target.Key, map[string]any{"plan": "business"}).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "PUT", path, admin.Key, map[string]any{"plan": "platinum"}).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "PUT", "/api/admin/accounts/"+uuid.NewString()+"/plan", admin.Key, map[string]any{"plan": "pro"}).Status)
	require.Empty(t, b.eventsOfType(t, target.ID, events.TypeAdminPlanSet), "refusals audit nothing")

	resp := b.do(t, "PUT", path, admin.Key, map[string]any{"plan": "business", "note": "annual contract"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var p api.AccountPlan
	resp.JSON(t, &p)
	require.Equal(t, plans.Business, p.Plan)
	require.Equal(t, 1000, *p.Limits.Domains)
	require.Equal(t, plans.Business, b.plan(t, target.Key).Plan)
	require.Equal(t, plans.Free, b.plan(t, bystander.Key).Plan)

	audit := b.eventsOfType(t, target.ID, events.TypeAdminPlanSet)
	require.Len(t, audit, 1)
	var a map[string]any
	require.NoError(t, json.Unmarshal(audit[0], &a))
	require.Equal(t, "business", a["plan"])
	require.Equal(t, "free", a["previous_plan"])
	require.Equal(t, admin.Key[:7], a["key_identifier"])
	require.Equal(t, "annual contract", a["note"])
	changed := b.eventsOfType(t, target.ID, events.TypePlanChanged)
	require.Len(t, changed, 1)
	require.JSONEq(t, `{"previous_plan":"free","plan":"business","reason":"admin"}`, string(changed[0]))
	require.Empty(t, b.eventsOfType(t, admin.ID, events.TypeAdminPlanSet), "the audit is on the affected account")

	// Setting the same plan again is audited but changes nothing.
	require.Equal(t, http.StatusOK, b.do(t, "PUT", path, admin.Key, map[string]any{"plan": "business"}).Status)
	require.Len(t, b.eventsOfType(t, target.ID, events.TypeAdminPlanSet), 2)
	require.Len(t, b.eventsOfType(t, target.ID, events.TypePlanChanged), 1)
}

// setPlan puts an account on plan directly (tests whose data spans more
// than the free plan allows).
func (b *testBundle) setPlan(t *testing.T, accountID, plan string) {
	t.Helper()
	_, err := b.db.Exec(context.Background(),
		"INSERT INTO account_plans (account_id, plan) VALUES ($1, $2) ON CONFLICT (account_id) DO UPDATE SET plan = excluded.plan", accountID, plan)
	require.NoError(t, err)
}

// TestStripeInvoiceKeepsOperatorPlan: an invoice.paid for an account with
// no subscription stored keeps the plan an operator set.
func TestStripeInvoiceKeepsOperatorPlan(t *testing.T) {
	t.Parallel()
	b := setup(t, withStripe)
	acct := b.createAccount(t)
	b.setPlan(t, acct.ID, plans.Business)
	customer := stripeID("cus")
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	co := b.sendStripe(t, stripeEvent(stripeID("evt"), "checkout.session.completed", t0, stripeCheckoutSession(acct.ID, customer, "")))
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, co.EventID, t0))
	paid := b.sendStripe(t, stripeEvent(stripeID("evt"), "invoice.paid", t0.Add(time.Second), stripeInvoice(customer, "", 1)))
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, paid.EventID, t0))
	p := b.plan(t, acct.Key)
	require.Equal(t, plans.Business, p.Plan)
	require.Equal(t, "active", p.Billing.Status)
}

// TestDefaultPlanUnlimited: on a server whose default plan is unlimited (no
// billing configured, or DEFAULT_PLAN=unlimited), an account nobody placed
// on a plan creates past every paid plan's counts, sees null limits and the
// server's whole retention, and returns to the default when the plan that
// billing gave it lapses.
func TestDefaultPlanUnlimited(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) {
		o.deps = func(d *api.Deps) {
			d.StripeWebhookSecret = testStripeSecret
			d.EventRetentionDays = 120
			d.DefaultPlan = plans.Unlimited
		}
	})
	admin, acct := b.createAccount(t), b.createAccount(t)
	b.makeAdmin(t, admin)
	free, _ := plans.Lookup(plans.Free)

	for i := range free.Domains + 1 {
		resp := b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": fmt.Sprintf("own%d.example.com", i)})
		require.Equal(t, http.StatusCreated, resp.Status, "a self-hosted team is not stopped at the free plan's count: %s", resp.Body)
	}
	p := b.plan(t, acct.Key)
	require.Equal(t, plans.Unlimited, p.Plan)
	require.True(t, p.IsDefault)
	require.Nil(t, p.Limits.Domains, "no limit is null, not a number")
	require.Nil(t, p.Limits.Subscriptions)
	require.Equal(t, 120, p.Limits.EventRetentionDays, "events are kept as long as the server keeps them")
	require.Equal(t, int64(free.Domains+1), p.Usage.Domains)

	// An operator's plan applies, and is not the default.
	resp := b.do(t, "PUT", "/api/admin/accounts/"+acct.ID+"/plan", admin.Key, map[string]any{"plan": "free"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp = b.do(t, "POST", "/api/accounts/me/domains", acct.Key, map[string]any{"domain": "over.example.com"})
	require.Equal(t, http.StatusPaymentRequired, resp.Status, "%s", resp.Body)
	p = b.plan(t, acct.Key)
	require.False(t, p.IsDefault)
	require.Equal(t, free.Domains, *p.Limits.Domains)
	changed := b.eventsOfType(t, acct.ID, events.TypePlanChanged)
	require.JSONEq(t, `{"previous_plan":"unlimited","plan":"free","reason":"admin"}`, string(changed[len(changed)-1]))

	// Billing grants pro; when the grace period of a failed payment ends,
	// the account goes back to the default plan, not to free.
	customer, sub, t0 := b.subscribePro(t, acct.ID)
	failed := stripeEvent(stripeID("evt"), "invoice.payment_failed", t0.Add(time.Minute), stripeInvoice(customer, sub, 1))
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, b.sendStripe(t, failed).EventID, t0))
	require.Equal(t, plans.Pro, b.plan(t, acct.Key).Plan)
	require.Equal(t, 1, b.expireGrace(t, plans.Unlimited, t0.Add(8*24*time.Hour)))
	p = b.plan(t, acct.Key)
	require.Equal(t, plans.Unlimited, p.Plan)
	require.True(t, p.IsDefault)
	changed = b.eventsOfType(t, acct.ID, events.TypePlanChanged)
	require.JSONEq(t, `{"previous_plan":"pro","plan":"unlimited","reason":"grace_expired"}`, string(changed[len(changed)-1]))

	// A subscription ending puts the account back on the default plan too.
	other := b.createAccount(t)
	customer, sub, t0 = b.subscribePro(t, other.ID)
	require.Equal(t, plans.Pro, b.plan(t, other.Key).Plan)
	ended := stripeEvent(stripeID("evt"), "customer.subscription.deleted", t0.Add(time.Minute), stripeSubscription(sub, customer, "canceled", "price_mw_pro"))
	endedID := b.sendStripe(t, ended).EventID
	require.Equal(t, billing.OutcomeApplied, b.applyStripe(t, endedID, t0.Add(time.Minute)))
	p = b.plan(t, other.Key)
	require.Equal(t, plans.Unlimited, p.Plan)
	require.True(t, p.IsDefault)
	require.Equal(t, "canceled", p.Billing.Status)
	changed = b.eventsOfType(t, other.ID, events.TypePlanChanged)
	require.JSONEq(t, fmt.Sprintf(`{"previous_plan":"pro","plan":"unlimited","reason":"stripe_subscription","stripe_event_id":%q,"stripe_subscription_id":%q}`,
		endedID, sub), string(changed[len(changed)-1]))

	// The bystander never had a plan of its own.
	require.Equal(t, plans.Unlimited, b.plan(t, admin.Key).Plan)
}
