package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/plans"
)

// Billing statuses.
const (
	StatusActive   = "active"
	StatusPastDue  = "past_due"
	StatusCanceled = "canceled"
)

// Reasons a plan_changed event gives.
const (
	ReasonStripeSubscription = "stripe_subscription"
	ReasonInvoicePaid        = "invoice_paid"
	ReasonGraceExpired       = "grace_expired"
	ReasonAdmin              = "admin"
)

// MetadataAccountID is the subscription metadata key that links a
// subscription to an account when its customer is not linked yet.
const MetadataAccountID = "mailwatch_account_id"

// DefaultGracePeriod is BILLING_GRACE_PERIOD's default.
const DefaultGracePeriod = 7 * 24 * time.Hour

// Outcomes recorded on a stored Stripe event.
const (
	OutcomeApplied  = "applied"
	OutcomeStale    = "stale"      // older than the state already applied
	OutcomeIgnored  = "ignored"    // a type mailwatch does not act on
	OutcomeNoAcct   = "no_account" // no account linked to the customer
	OutcomeConflict = "conflict"   // the customer is linked to another account
	OutcomeInvalid  = "invalid"    // data.object unreadable, or holding text Postgres cannot store
)

// ErrNoAccount means the event's customer is not linked to an account
// (yet: checkout.session.completed may arrive after the subscription's
// events). The job retries for a while before recording OutcomeNoAcct.
var ErrNoAccount = errors.New("no account is linked to the Stripe customer")

// StoreEvent stores a verified event in tx; stored is false when the event
// id was stored before (a replay, to be acknowledged and ignored).
func StoreEvent(ctx context.Context, tx dbutil.Tx, ev *Event, payload []byte) (stored bool, err error) {
	n, err := dbsqlc.New().StripeEventInsert(ctx, tx, dbsqlc.StripeEventInsertParams{
		ID: ev.ID, Type: ev.Type, Created: ev.CreatedAt(), Payload: payload,
	})
	if err != nil {
		return false, fmt.Errorf("error storing Stripe event: %w", err)
	}
	return n == 1, nil
}

// Applier applies stored Stripe events to accounts.
type Applier struct {
	// Emitter writes plan_changed and payment_failed in the applying tx.
	Emitter *events.Emitter
	// Prices maps Stripe price ids to plans; an unmapped price is free.
	Prices plans.PriceMap
	// Grace is how long a past-due account keeps its plan.
	Grace time.Duration
	// Default is the plan of an account no subscription grants one
	// (DEFAULT_PLAN); empty is free.
	Default string
}

// Apply applies the stored event id once: a second call (a re-run job)
// does nothing. It returns the outcome recorded, or ErrNoAccount (nothing
// recorded) when the event's customer is not linked to an account yet.
func (a *Applier) Apply(ctx context.Context, tx dbutil.Tx, id string, now time.Time) (string, error) {
	q := dbsqlc.New()
	row, err := q.StripeEventGetForUpdate(ctx, tx, id)
	if err != nil {
		return "", fmt.Errorf("error reading Stripe event %s: %w", id, err)
	}
	if row.AppliedAt != nil {
		return *row.Outcome, nil
	}
	var ev Event
	if err := json.Unmarshal(row.Payload, &ev); err != nil {
		return a.record(ctx, tx, id, OutcomeInvalid, nil, now)
	}
	created := row.Created
	var (
		outcome string
		account *uuid.UUID
	)
	switch ev.Type {
	case "checkout.session.completed":
		outcome, account, err = a.checkoutCompleted(ctx, tx, ev.Data.Object)
	case "customer.subscription.created", "customer.subscription.updated", "customer.subscription.deleted":
		outcome, account, err = a.subscriptionChanged(ctx, tx, &ev, created, now)
	case "invoice.paid", "invoice.payment_failed":
		outcome, account, err = a.invoiceEvent(ctx, tx, &ev, created, now)
	default:
		outcome = OutcomeIgnored
	}
	if err != nil {
		return "", err
	}
	return a.record(ctx, tx, id, outcome, account, now)
}

func (a *Applier) record(ctx context.Context, tx dbutil.Tx, id, outcome string, account *uuid.UUID, now time.Time) (string, error) {
	err := dbsqlc.New().StripeEventMarkApplied(ctx, tx, dbsqlc.StripeEventMarkAppliedParams{
		ID: id, AppliedAt: now, Outcome: outcome, AccountID: account,
	})
	if err != nil {
		return "", fmt.Errorf("error recording Stripe event %s: %w", id, err)
	}
	return outcome, nil
}

func (a *Applier) checkoutCompleted(ctx context.Context, tx dbutil.Tx, raw json.RawMessage) (string, *uuid.UUID, error) {
	var cs checkoutSession
	if err := json.Unmarshal(raw, &cs); err != nil || !storable(string(cs.Customer)) {
		return OutcomeInvalid, nil, nil
	}
	accountID, err := uuid.Parse(cs.ClientReferenceID)
	if err != nil || cs.Customer == "" {
		return OutcomeNoAcct, nil, nil
	}
	q := dbsqlc.New()
	if _, err := q.AccountGetByID(ctx, tx, accountID); dbutil.IsNotFound(err) {
		return OutcomeNoAcct, nil, nil
	} else if err != nil {
		return "", nil, err
	}
	if err := a.link(ctx, tx, accountID, string(cs.Customer)); err != nil {
		if errors.Is(err, errCustomerTaken) {
			return OutcomeConflict, &accountID, nil
		}
		return "", nil, err
	}
	return OutcomeApplied, &accountID, nil
}

var errCustomerTaken = errors.New("the Stripe customer is linked to another account")

// link records customer as the account's Stripe customer.
func (a *Applier) link(ctx context.Context, tx dbutil.Tx, accountID uuid.UUID, customer string) error {
	q := dbsqlc.New()
	if holder, err := q.AccountPlanGetByCustomer(ctx, tx, customer); err == nil {
		if holder.AccountID != accountID {
			return errCustomerTaken
		}
		return nil
	} else if !dbutil.IsNotFound(err) {
		return err
	}
	if err := q.AccountPlanEnsure(ctx, tx, accountID); err != nil {
		return err
	}
	return q.AccountPlanSetCustomer(ctx, tx, dbsqlc.AccountPlanSetCustomerParams{AccountID: accountID, CustomerID: customer})
}

// accountOf finds the account of customer; ErrNoAccount when none.
func (a *Applier) accountOf(ctx context.Context, tx dbutil.Tx, customer string, metadata map[string]string) (uuid.UUID, error) {
	q := dbsqlc.New()
	if customer != "" {
		p, err := q.AccountPlanGetByCustomer(ctx, tx, customer)
		if err == nil {
			return p.AccountID, nil
		}
		if !dbutil.IsNotFound(err) {
			return uuid.Nil, err
		}
	}
	if id, err := uuid.Parse(metadata[MetadataAccountID]); err == nil && customer != "" {
		if _, err := q.AccountGetByID(ctx, tx, id); err == nil {
			if err := a.link(ctx, tx, id, customer); err == nil {
				return id, nil
			} else if !errors.Is(err, errCustomerTaken) {
				return uuid.Nil, err
			}
		} else if !dbutil.IsNotFound(err) {
			return uuid.Nil, err
		}
	}
	return uuid.Nil, ErrNoAccount
}

func (a *Applier) subscriptionChanged(ctx context.Context, tx dbutil.Tx, ev *Event, created, now time.Time) (string, *uuid.UUID, error) {
	var sub subscription
	if err := json.Unmarshal(ev.Data.Object, &sub); err != nil || sub.ID == "" || !storable(sub.ID, string(sub.Customer), sub.Status, sub.priceID()) {
		return OutcomeInvalid, nil, nil
	}
	accountID, err := a.accountOf(ctx, tx, string(sub.Customer), sub.Metadata)
	if err != nil {
		return "", nil, err
	}
	status := sub.Status
	if ev.Type == "customer.subscription.deleted" {
		status = "canceled"
	}
	price := sub.priceID()
	plan := plans.Free
	if p, ok := a.Prices[price]; ok {
		plan = p
	}
	var pricePtr *string
	if price != "" {
		pricePtr = &price
	}
	q := dbsqlc.New()
	n, err := q.StripeSubscriptionUpsert(ctx, tx, dbsqlc.StripeSubscriptionUpsertParams{
		ID: sub.ID, AccountID: accountID, CustomerID: string(sub.Customer), Status: status, PriceID: pricePtr,
		Plan: plan, EventID: ev.ID, EventCreated: created,
	})
	if err != nil {
		return "", nil, fmt.Errorf("error storing subscription %s: %w", sub.ID, err)
	}
	if n == 0 {
		return OutcomeStale, &accountID, nil
	}
	if err := a.settle(ctx, tx, accountID, ReasonStripeSubscription, ev.ID, sub.ID, now); err != nil {
		return "", nil, err
	}
	return OutcomeApplied, &accountID, nil
}

// settle recomputes the account's plan and status from its stored
// subscriptions and billing state, emitting plan_changed on a change.
func (a *Applier) settle(ctx context.Context, tx dbutil.Tx, accountID uuid.UUID, reason, eventID, subID string, now time.Time) error {
	q := dbsqlc.New()
	if err := q.AccountPlanEnsure(ctx, tx, accountID); err != nil {
		return err
	}
	cur, err := q.AccountPlanGetForUpdate(ctx, tx, accountID)
	if err != nil {
		return err
	}
	subs, err := q.StripeSubscriptionListByAccount(ctx, tx, accountID)
	if err != nil {
		return err
	}
	// The biggest plan an entitled subscription grants; none (nil): the
	// default plan.
	var granted *string
	anyEntitled := false
	for _, s := range subs {
		if !entitled(s.Status) {
			continue
		}
		anyEntitled = true
		if granted == nil || plans.Get(s.Plan).Rank > plans.Get(*granted).Rank {
			granted = &s.Plan
		}
	}
	status, grace := cur.BillingStatus, cur.GraceUntil
	switch {
	case len(subs) > 0 && !anyEntitled:
		status, grace = StatusCanceled, nil
	case anyEntitled && status == StatusCanceled:
		status = StatusActive
	}
	// Without any subscription stored (an invoice before its subscription's
	// events, an operator's plan) there is nothing to recompute from.
	plan := cur.Plan
	if len(subs) > 0 {
		plan = granted
	}
	if status == StatusPastDue && grace != nil && !now.Before(*grace) {
		plan = nil
	}
	if status != cur.BillingStatus || !timeEq(grace, cur.GraceUntil) {
		if err := q.AccountPlanSetBilling(ctx, tx, dbsqlc.AccountPlanSetBillingParams{
			AccountID: accountID, BillingStatus: status, GraceUntil: grace, InvoiceEventAt: cur.InvoiceEventAt,
		}); err != nil {
			return err
		}
	}
	return a.changePlan(ctx, tx, accountID, cur.Plan, plan, reason, eventID, subID)
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// changePlan stores the plan (nil: the default) and emits plan_changed
// when the plan in effect differs.
func (a *Applier) changePlan(ctx context.Context, tx dbutil.Tx, accountID uuid.UUID, from, to *string, reason, eventID, subID string) error {
	if samePlan(from, to) {
		return nil
	}
	if err := dbsqlc.New().AccountPlanSetPlan(ctx, tx, dbsqlc.AccountPlanSetPlanParams{AccountID: accountID, Plan: to}); err != nil {
		return err
	}
	return emitPlanChanged(ctx, tx, a.Emitter, accountID, plans.Effective(from, a.Default).Name, plans.Effective(to, a.Default).Name,
		reason, eventID, subID)
}

func samePlan(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func emitPlanChanged(ctx context.Context, tx dbutil.Tx, em *events.Emitter, accountID uuid.UUID, from, to, reason, eventID, subID string) error {
	if from == to {
		return nil // stored differently (the default, or the same plan named), in effect the same
	}
	payload := map[string]any{"previous_plan": from, "plan": to, "reason": reason}
	if eventID != "" {
		payload["stripe_event_id"] = eventID
	}
	if subID != "" {
		payload["stripe_subscription_id"] = subID
	}
	sev := events.SeverityInfo
	if plans.Get(to).Rank < plans.Get(from).Rank {
		sev = events.SeverityWarning
	}
	_, err := em.Emit(ctx, tx, events.Event{AccountID: accountID, Type: events.TypePlanChanged, Payload: payload, Severity: sev})
	return err
}

func (a *Applier) invoiceEvent(ctx context.Context, tx dbutil.Tx, ev *Event, created, now time.Time) (string, *uuid.UUID, error) {
	var inv invoice
	if err := json.Unmarshal(ev.Data.Object, &inv); err != nil || inv.ID == "" || !storable(inv.ID, string(inv.Customer)) {
		return OutcomeInvalid, nil, nil
	}
	accountID, err := a.accountOf(ctx, tx, string(inv.Customer), nil)
	if err != nil {
		return "", nil, err
	}
	q := dbsqlc.New()
	if err := q.AccountPlanEnsure(ctx, tx, accountID); err != nil {
		return "", nil, err
	}
	cur, err := q.AccountPlanGetForUpdate(ctx, tx, accountID)
	if err != nil {
		return "", nil, err
	}
	if cur.InvoiceEventAt != nil && created.Before(*cur.InvoiceEventAt) {
		return OutcomeStale, &accountID, nil
	}
	if ev.Type == "invoice.paid" {
		if err := q.AccountPlanSetBilling(ctx, tx, dbsqlc.AccountPlanSetBillingParams{
			AccountID: accountID, BillingStatus: StatusActive, InvoiceEventAt: &created,
		}); err != nil {
			return "", nil, err
		}
		// A plan lost to an expired grace period comes back with payment.
		if err := a.settle(ctx, tx, accountID, ReasonInvoicePaid, ev.ID, "", now); err != nil {
			return "", nil, err
		}
		return OutcomeApplied, &accountID, nil
	}
	grace := cur.GraceUntil
	if cur.BillingStatus != StatusPastDue || grace == nil {
		g := created.Add(a.grace())
		grace = &g
	}
	if err := q.AccountPlanSetBilling(ctx, tx, dbsqlc.AccountPlanSetBillingParams{
		AccountID: accountID, BillingStatus: StatusPastDue, GraceUntil: grace, InvoiceEventAt: &created,
	}); err != nil {
		return "", nil, err
	}
	payload := map[string]any{
		"invoice_id": inv.ID, "customer_id": string(inv.Customer), "amount_due": inv.AmountDue, "currency": inv.Currency,
		"attempt_count": inv.AttemptCount, "plan": plans.Effective(cur.Plan, a.Default).Name, "grace_until": grace.UTC().Format(time.RFC3339),
		"stripe_event_id": ev.ID,
	}
	if _, err := a.Emitter.Emit(ctx, tx, events.Event{AccountID: accountID, Type: events.TypePaymentFailed, Payload: payload}); err != nil {
		return "", nil, err
	}
	return OutcomeApplied, &accountID, nil
}

func (a *Applier) grace() time.Duration {
	if a.Grace > 0 {
		return a.Grace
	}
	return DefaultGracePeriod
}

// ExpireGrace moves up to max past-due accounts whose grace period ended
// to the default plan def, emitting plan_changed; it returns how many it
// moved.
func ExpireGrace(ctx context.Context, tx dbutil.Tx, em *events.Emitter, def string, now time.Time, max int) (int, error) {
	q := dbsqlc.New()
	rows, err := q.AccountPlanGraceExpired(ctx, tx, dbsqlc.AccountPlanGraceExpiredParams{Now: now, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("error listing expired grace periods: %w", err)
	}
	for _, r := range rows {
		if err := q.AccountPlanSetPlan(ctx, tx, dbsqlc.AccountPlanSetPlanParams{AccountID: r.AccountID}); err != nil {
			return 0, err
		}
		from, to := plans.Effective(r.Plan, def).Name, plans.Effective(nil, def).Name
		if err := emitPlanChanged(ctx, tx, em, r.AccountID, from, to, ReasonGraceExpired, "", ""); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// SetPlan sets the account's plan by hand (operators), auditing it as
// admin_plan_set and emitting plan_changed when the plan changes. The
// next Stripe subscription event for the account recomputes the plan from
// its subscriptions. def is the default plan (what the account was on
// without a plan of its own). It returns the previous plan; ErrNoAccount
// when the account does not exist.
func SetPlan(ctx context.Context, tx dbutil.Tx, em *events.Emitter, accountID uuid.UUID, plan, def, keyIdentifier string, note *string) (string, error) {
	if _, ok := plans.Lookup(plan); !ok {
		return "", plans.ErrUnknownPlan
	}
	q := dbsqlc.New()
	if _, err := q.AccountPlanLock(ctx, tx, accountID); dbutil.IsNotFound(err) {
		return "", ErrNoAccount
	} else if err != nil {
		return "", err
	}
	if err := q.AccountPlanEnsure(ctx, tx, accountID); err != nil {
		return "", err
	}
	cur, err := q.AccountPlanGetForUpdate(ctx, tx, accountID)
	if err != nil {
		return "", err
	}
	if err := q.AccountPlanSetPlan(ctx, tx, dbsqlc.AccountPlanSetPlanParams{AccountID: accountID, Plan: &plan}); err != nil {
		return "", err
	}
	previous := plans.Effective(cur.Plan, def).Name
	audit := map[string]any{"plan": plan, "previous_plan": previous, "key_identifier": keyIdentifier}
	if note != nil {
		audit["note"] = *note
	}
	if _, err := em.Emit(ctx, tx, events.Event{AccountID: accountID, Type: events.TypeAdminPlanSet, Payload: audit}); err != nil {
		return "", err
	}
	if err := emitPlanChanged(ctx, tx, em, accountID, previous, plan, ReasonAdmin, "", ""); err != nil {
		return "", err
	}
	return previous, nil
}

// State is an account's plan and billing state.
type State struct {
	Plan plans.Plan
	// IsDefault says the plan is the instance's default (DEFAULT_PLAN):
	// neither billing nor an operator set one for the account.
	IsDefault             bool
	Status                string
	GraceUntil            *time.Time
	StripeCustomerID      *string
	StripeSubscriptionID  *string
	StripeSubscriptionSts *string
	Usage                 Counts
}

// GetState reads the account's plan (def when it has none of its own),
// billing state and usage.
func GetState(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID, def string, now time.Time) (*State, error) {
	q := dbsqlc.New()
	row, err := q.AccountPlanGet(ctx, db, accountID)
	if err != nil {
		return nil, err
	}
	st := &State{Plan: plans.Effective(row.Plan, def), IsDefault: row.Plan == nil, Status: row.BillingStatus, GraceUntil: row.GraceUntil, StripeCustomerID: row.StripeCustomerID}
	subs, err := q.StripeSubscriptionListByAccount(ctx, db, accountID)
	if err != nil {
		return nil, err
	}
	if len(subs) > 0 {
		st.StripeSubscriptionID, st.StripeSubscriptionSts = &subs[0].ID, &subs[0].Status
	}
	if st.Usage, err = Usage(ctx, db, accountID, now); err != nil {
		return nil, err
	}
	return st, nil
}

// RecordUnmatched records that the event's customer never got linked to an
// account (the job gave up waiting for checkout.session.completed).
func RecordUnmatched(ctx context.Context, tx dbutil.Tx, id string, now time.Time) error {
	row, err := dbsqlc.New().StripeEventGetForUpdate(ctx, tx, id)
	if err != nil {
		return fmt.Errorf("error reading Stripe event %s: %w", id, err)
	}
	if row.AppliedAt != nil {
		return nil
	}
	_, err = (&Applier{}).record(ctx, tx, id, OutcomeNoAcct, nil, now)
	return err
}
