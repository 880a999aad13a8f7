package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/plans"
)

// checkPlanLimit runs in a create's transaction before its insert: it locks
// the account row (so concurrent creates count one after the other) and
// answers 402 when the account's plan is full. 402, not 409: the request
// is valid and nothing clashes; paying for a bigger plan makes it succeed.
func (s *Server) checkPlanLimit(ctx context.Context, tx dbutil.Tx, accountID uuid.UUID, limit string) error {
	err := billing.CheckLimit(ctx, tx, accountID, limit, s.deps.DefaultPlan, s.now())
	var le *billing.LimitError
	if errors.As(err, &le) {
		return &Error{Status: http.StatusPaymentRequired, Detail: le.Error()}
	}
	return err
}

// PlanLimits are a plan's limits; a null count is not limited (the
// unlimited plan).
type PlanLimits struct {
	Domains            *int `json:"domains" validate:"required" description:"Monitored domains; null: no limit."`
	Receivers          *int `json:"receivers" validate:"required" description:"Receivers live (not expired) at once; null: no limit."`
	Subscriptions      *int `json:"subscriptions" validate:"required" description:"Event subscriptions; null: no limit (the server's absolute cap of 100 still applies)."`
	Providers          *int `json:"providers" validate:"required" description:"Sending providers; null: no limit (the server's absolute cap of 50 still applies)."`
	EventRetentionDays int  `json:"event_retention_days" validate:"required" description:"Days events are kept: the plan's retention, capped by the server's EVENT_RETENTION_DAYS."`
}

// PlanUsage is what an account holds of each counted limit.
type PlanUsage struct {
	Domains       int64 `json:"domains" validate:"required"`
	Receivers     int64 `json:"receivers" validate:"required" description:"Live receivers only."`
	Subscriptions int64 `json:"subscriptions" validate:"required"`
	Providers     int64 `json:"providers" validate:"required"`
}

// Billing is an account's payment state.
type Billing struct {
	Status                   string     `json:"status" validate:"required" enum:"active,past_due,canceled" description:"active; past_due after a failed payment (the plan holds until grace_until, then moves to the default plan unless an invoice is paid); canceled once no Stripe subscription grants a plan."`
	GraceUntil               *time.Time `json:"grace_until" validate:"required" description:"While past_due: when the plan moves to the default plan. Null otherwise."`
	StripeCustomerID         *string    `json:"stripe_customer_id" validate:"required" description:"The linked Stripe customer (checkout.session.completed with client_reference_id = the account id); null when none."`
	StripeSubscriptionID     *string    `json:"stripe_subscription_id" validate:"required" description:"The Stripe subscription most recently changed; null when none."`
	StripeSubscriptionStatus *string    `json:"stripe_subscription_status" validate:"required" description:"That subscription's Stripe status (active, trialing, past_due, canceled, ...)."`
}

// AccountPlan is GET /api/accounts/me/plan.
type AccountPlan struct {
	Plan string `json:"plan" validate:"required" enum:"free,pro,business,unlimited"`
	// IsDefault: the plan comes from the server's DEFAULT_PLAN.
	IsDefault bool       `json:"is_default" validate:"required" description:"True when the account is on the server's default plan (DEFAULT_PLAN: free where billing is configured, unlimited otherwise), which neither a Stripe subscription nor an operator set."`
	Limits    PlanLimits `json:"limits" validate:"required"`
	Usage     PlanUsage  `json:"usage" validate:"required"`
	Billing   Billing    `json:"billing" validate:"required"`
}

// SetPlanRequest is PUT /api/admin/accounts/{account_id}/plan.
type SetPlanRequest struct {
	AccountID uuid.UUID `path:"account_id" format:"uuid"`
	Plan      string    `json:"plan" validate:"required,oneof=free pro business unlimited" description:"free, pro, business or unlimited."`
	Note      *string   `json:"note,omitempty" validate:"omitempty,max=500" description:"Why, for the audit trail (admin_plan_set)."`
}

// StripeIngressResult says what the Stripe webhook stored.
type StripeIngressResult struct {
	EventID   string `json:"event_id" validate:"required"`
	Type      string `json:"type" validate:"required"`
	Duplicate bool   `json:"duplicate" validate:"required" description:"True when this event id was stored before: the replay was ignored."`
}

func (s *Server) billingRoutes() {
	s.ops.GetAccountPlan = Handle(s.router, Endpoint[emptyRequest, AccountPlan]{
		Method: "GET", Path: "/api/accounts/me/plan", OperationID: "getAccountPlan", Tag: "plans",
		Summary: "The account's plan, its limits, usage and billing state",
		Description: "Limits apply to creates: a create beyond one answers 402 with a detail naming the limit, the plan and " +
			"the numbers. Plans never change the per-key request rate limit. Event retention is the plan's, capped by the " +
			"server's EVENT_RETENTION_DAYS.",
		Call: s.getAccountPlan,
	})
	Handle(s.router, Endpoint[SetPlanRequest, AccountPlan]{
		Method: "PUT", Path: "/api/admin/accounts/{account_id}/plan", OperationID: "adminSetPlan", Tag: "admin", Auth: AuthAdmin,
		Summary: "Set an account's plan by hand (operators)",
		Description: "Audited as admin_plan_set on the account; emits plan_changed when the plan changes. The next Stripe " +
			"subscription event for the account recomputes the plan from its subscriptions. An unknown account is 404.",
		Call: s.adminSetPlan,
	})

	HandleRaw(s.router, Endpoint[emptyRequest, StripeIngressResult]{
		Method: "POST", Path: "/api/webhooks/payments/stripe", OperationID: "ingestStripeEvent", Tag: "webhook ingress", Auth: AuthIngress,
		Summary: "Stripe webhook (plans and payments)",
		Description: "Point a Stripe webhook endpoint here. Stripe-Signature is verified under STRIPE_WEBHOOK_SECRET " +
			"(timestamp at most 300 s old and at most 300 s ahead of the server's clock; any of several v1 signatures may match, " +
			"as while a secret rolls). The verified event " +
			"is stored with the job that applies it in one transaction, once per event id: a replay answers 200 with " +
			"duplicate: true and changes nothing. Applied types: checkout.session.completed (links the customer to the account " +
			"named by client_reference_id), customer.subscription.created/updated/deleted (price -> plan by STRIPE_PRICE_PLANS; " +
			"an event older than the subscription state already applied changes nothing), invoice.paid, invoice.payment_failed " +
			"(BILLING_GRACE_PERIOD, then the default plan). Other types are stored and acknowledged. 401 bad or missing signature (the " +
			"detail says which part failed), 400 a body that is not a Stripe event (or whose id or type holds a NUL character), 503 " +
			"when no secret is configured.",
		Errors:    []int{400, 401, 503},
		BodyTypes: []string{"application/json"},
	}, s.ingestStripe)
}

func (s *Server) accountPlanView(ctx context.Context, db dbutil.Executor, accountID uuid.UUID) (*AccountPlan, error) {
	st, err := billing.GetState(ctx, db, accountID, s.deps.DefaultPlan, s.now())
	if err != nil {
		return nil, err
	}
	p := st.Plan
	limit := func(name string) *int {
		if n, limited, _ := p.Limit(name); limited {
			return &n
		}
		return nil
	}
	return &AccountPlan{
		Plan:      p.Name,
		IsDefault: st.IsDefault,
		Limits: PlanLimits{
			Domains: limit(plans.LimitDomains), Receivers: limit(plans.LimitReceivers),
			Subscriptions: limit(plans.LimitSubscriptions), Providers: limit(plans.LimitProviders),
			EventRetentionDays: p.RetentionDays(s.deps.EventRetentionDays),
		},
		Usage: PlanUsage(st.Usage),
		Billing: Billing{
			Status: st.Status, GraceUntil: utcPtr(st.GraceUntil), StripeCustomerID: st.StripeCustomerID,
			StripeSubscriptionID: st.StripeSubscriptionID, StripeSubscriptionStatus: st.StripeSubscriptionSts,
		},
	}, nil
}

func (s *Server) getAccountPlan(ctx context.Context, _ *emptyRequest) (*AccountPlan, error) {
	return s.accountPlanView(ctx, s.db, mustCaller(ctx).AccountID)
}

func (s *Server) adminSetPlan(ctx context.Context, req *SetPlanRequest) (*AccountPlan, error) {
	caller := mustCaller(ctx)
	return dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (*AccountPlan, error) {
		_, err := billing.SetPlan(ctx, tx, s.deps.Emitter, req.AccountID, req.Plan, s.deps.DefaultPlan, caller.KeyIdentifier, req.Note)
		if errors.Is(err, billing.ErrNoAccount) {
			return nil, NotFound("account")
		}
		if errors.Is(err, plans.ErrUnknownPlan) {
			return nil, InvalidField("plan", "must be "+strings.Join(plans.Names(), ", "))
		}
		if err != nil {
			return nil, err
		}
		return s.accountPlanView(ctx, tx, req.AccountID)
	})
}

func (s *Server) ingestStripe(c *fiber.Ctx) error {
	secret := s.deps.StripeWebhookSecret
	if secret == "" {
		return Unavailable("Stripe ingress is not configured on this server (STRIPE_WEBHOOK_SECRET is unset)")
	}
	body := c.Body()
	header := string(c.Request().Header.Peek("Stripe-Signature"))
	if err := billing.VerifyStripe(body, header, secret, s.now()); err != nil {
		return unauthorized(err.Error())
	}
	ev, err := billing.ParseEvent(body)
	if err != nil {
		return BadRequest("%s", err.Error())
	}
	payload := append([]byte(nil), body...)
	ctx := c.UserContext()
	stored, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (bool, error) {
		stored, err := billing.StoreEvent(ctx, tx, ev, payload)
		if err != nil || !stored {
			return stored, err
		}
		if _, err := s.deps.River.InsertTx(ctx, tx, billing.StripeEventArgs{EventID: ev.ID}, nil); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	return c.Status(http.StatusOK).JSON(StripeIngressResult{EventID: strings.Clone(ev.ID), Type: strings.Clone(ev.Type), Duplicate: !stored})
}
