package api

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliveries"
)

// Delivery is one push of one event to one subscription.
type Delivery struct {
	ID             uuid.UUID  `json:"id" validate:"required" description:"Also the webhook-id header of every attempt."`
	SubscriptionID uuid.UUID  `json:"subscription_id" validate:"required"`
	EventID        uuid.UUID  `json:"event_id" validate:"required"`
	EventType      string     `json:"event_type" validate:"required"`
	Status         string     `json:"status" validate:"required" enum:"pending,retrying,delivered,failed" description:"pending: queued, never attempted; retrying: failed, attempts left; delivered; failed: no attempts left or a permanent error."`
	Attempts       int32      `json:"attempts" validate:"required" description:"Attempts made (a 429/503 with Retry-After does not use one)."`
	MaxAttempts    int32      `json:"max_attempts" validate:"required" description:"Attempt ceiling: 10, plus one per manual retry of a failed or delivered delivery."`
	LastStatusCode *int32     `json:"last_status_code" validate:"required"`
	LastErrorClass *string    `json:"last_error_class" validate:"required"`
	LastError      *string    `json:"last_error" validate:"required"`
	NextRetryAt    *time.Time `json:"next_retry_at" validate:"required" description:"When the next attempt runs (River's scheduled time); null when none is planned, and while pending_reconciliation is true."`
	JobID          *int64     `json:"job_id" validate:"required" description:"The River job that owns the delivery now (find it in River UI, or with mailwatch jobs list); null before the first job exists."`
	// PendingReconciliation is computed when the delivery is read.
	PendingReconciliation bool       `json:"pending_reconciliation" validate:"required" description:"true when the row still says pending or retrying but its River job was cancelled or deleted outside the API (River UI, mailwatch jobs, SQL): no further attempt will run, and the reconciler marks the delivery failed within about 90 s (at once when the job was cancelled or deleted through mailwatch ui or mailwatch jobs)."`
	CreatedAt             time.Time  `json:"created_at" validate:"required"`
	UpdatedAt             time.Time  `json:"updated_at" validate:"required"`
	DeliveredAt           *time.Time `json:"delivered_at" validate:"required"`
}

// DeliveryAttempt is one recorded push.
type DeliveryAttempt struct {
	ID                uuid.UUID  `json:"id" validate:"required"`
	StartedAt         time.Time  `json:"started_at" validate:"required"`
	FinishedAt        *time.Time `json:"finished_at" validate:"required" description:"null while in flight."`
	StatusCode        *int32     `json:"status_code" validate:"required"`
	ErrorClass        *string    `json:"error_class" validate:"required" description:"null on success; interrupted when the worker died mid-attempt."`
	Error             *string    `json:"error" validate:"required"`
	DurationMS        *int32     `json:"duration_ms" validate:"required"`
	ResponseBody      *string    `json:"response_body" validate:"required" description:"Start of the response body (at most 4 KiB)."`
	ResponseTruncated bool       `json:"response_truncated" validate:"required"`
	Counted           bool       `json:"counted" validate:"required" description:"false for a push that did not use an attempt (429/503 with Retry-After)."`
}

// DeliveryDetail is a delivery with its attempts.
type DeliveryDetail struct {
	Delivery
	AttemptLog []DeliveryAttempt `json:"attempt_log" validate:"required" description:"Every attempt, oldest first."`
}

// deliveryFromRow renders a row; jobStates holds the state of the River
// jobs of queued rows (deliveries.JobStates), missing for a deleted job.
func deliveryFromRow(d dbsqlc.WebhookDelivery, jobStates map[int64]string) Delivery {
	out := Delivery{
		ID: d.ID, SubscriptionID: d.SubscriptionID, EventID: d.EventID, EventType: d.EventType, Status: d.Status,
		Attempts: d.Attempts, MaxAttempts: d.MaxAttempts, LastStatusCode: d.LastStatusCode, LastErrorClass: d.LastErrorClass,
		LastError: d.LastError, NextRetryAt: whUTC(d.NextRetryAt), JobID: d.JobID, CreatedAt: d.CreatedAt.UTC(),
		UpdatedAt: d.UpdatedAt.UTC(), DeliveredAt: whUTC(d.DeliveredAt),
	}
	if jobStates != nil && d.JobID != nil && deliveries.AwaitsReconcile(d.Status, jobStates[*d.JobID]) {
		out.PendingReconciliation, out.NextRetryAt = true, nil
	}
	return out
}

// queuedJobStates reads the River job state of every queued row (pending
// or retrying): one query per page.
func (s *Server) queuedJobStates(ctx context.Context, rows ...dbsqlc.WebhookDelivery) (map[int64]string, error) {
	var ids []int64
	for _, d := range rows {
		if d.JobID != nil && deliveries.Queued(d.Status) {
			ids = append(ids, *d.JobID)
		}
	}
	return deliveries.JobStates(ctx, s.db, ids)
}

func attemptFromRow(a dbsqlc.WebhookDeliveryAttempt) DeliveryAttempt {
	return DeliveryAttempt{
		ID: a.ID, StartedAt: a.StartedAt.UTC(), FinishedAt: whUTC(a.FinishedAt), StatusCode: a.StatusCode,
		ErrorClass: a.ErrorClass, Error: a.Error, DurationMS: a.DurationMs, ResponseBody: a.ResponseBody,
		ResponseTruncated: a.ResponseTruncated, Counted: a.Counted,
	}
}

// ListDeliveriesRequest filters GET .../deliveries.
type ListDeliveriesRequest struct {
	Status         string     `query:"status" validate:"omitempty,oneof=pending delivered failed retrying" description:"Only deliveries in this status."`
	SubscriptionID *uuid.UUID `query:"subscription_id" format:"uuid" description:"Only deliveries of this subscription."`
	EventID        *uuid.UUID `query:"event_id" format:"uuid" description:"Only deliveries of this event."`
	Limit          *int       `query:"limit" validate:"omitempty,min=1,max=200" default:"50" description:"Page size, 1 to 200 (default 50)."`
	Cursor         string     `query:"cursor" description:"X-Next-Cursor of the previous page."`
}

// DeliveryPage is one page of deliveries, newest first.
type DeliveryPage = Page[Delivery]

// DeliveryPath names one delivery.
type DeliveryPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

func (s *Server) deliveryRoutes() {
	s.ops.ListDeliveries = Handle(s.router, Endpoint[ListDeliveriesRequest, DeliveryPage]{
		Method: "GET", Path: "/api/accounts/me/deliveries", OperationID: "listDeliveries", Tag: "deliveries",
		Summary:     "List webhook deliveries, newest first",
		Description: "Filter by status, subscription_id and event_id; paginate with the X-Next-Cursor header. A malformed cursor is 422.",
		Call:        s.listDeliveries,
	})
	s.ops.GetDelivery = Handle(s.router, Endpoint[DeliveryPath, DeliveryDetail]{
		Method: "GET", Path: "/api/accounts/me/deliveries/{id}", OperationID: "getDelivery", Tag: "deliveries", Errors: []int{404},
		Summary: "One delivery with its attempts",
		Call:    s.getDelivery,
	})
	s.ops.RetryDelivery = Handle(s.router, Endpoint[DeliveryPath, Delivery]{
		Method: "POST", Path: "/api/accounts/me/deliveries/{id}/retry", Status: 202, OperationID: "retryDelivery", Tag: "deliveries",
		Summary: "Push a delivery again now",
		Description: "Queues one immediate attempt. On a retrying delivery it is the next scheduled attempt, run now " +
			"(max_attempts unchanged). On a failed or delivered delivery it is one extra attempt (max_attempts becomes " +
			"attempts + 1); if it fails, the delivery ends failed again. 409 while the delivery is queued or running, " +
			"or when its subscription is disabled. Right after an attempt is recorded, while River is still finishing its job, " +
			"the request waits (up to 2 s) for the job instead of answering 409.",
		Errors: []int{404, 409},
		Call:   s.retryDelivery,
	})
}

// listDeliveries serves GET /api/accounts/me/deliveries: list webhook deliveries, newest first.
func (s *Server) listDeliveries(ctx context.Context, req *ListDeliveriesRequest) (*DeliveryPage, error) {
	p := dbsqlc.DeliveryListParams{AccountID: mustCaller(ctx).AccountID, SubscriptionID: req.SubscriptionID, EventID: req.EventID, Max: 50}
	q := url.Values{}
	if req.Status != "" {
		p.Status = &req.Status
		q.Set("status", req.Status)
	}
	if req.SubscriptionID != nil {
		q.Set("subscription_id", req.SubscriptionID.String())
	}
	if req.EventID != nil {
		q.Set("event_id", req.EventID.String())
	}
	if req.Limit != nil {
		p.Max = int32(*req.Limit)
	}
	q.Set("limit", strconv.Itoa(int(p.Max)))
	if req.Cursor != "" {
		id, err := uuid.Parse(req.Cursor)
		if err != nil {
			return nil, InvalidField("cursor", "is malformed; pass X-Next-Cursor of the previous page as is")
		}
		p.Before = &id
	}
	limit := p.Max
	p.Max++ // one more tells whether a next page exists
	rows, err := s.q.DeliveryList(ctx, s.db, p)
	if err != nil {
		return nil, err
	}
	out := &DeliveryPage{Items: make([]Delivery, 0, len(rows)), path: "/api/accounts/me/deliveries", query: q}
	if int32(len(rows)) > limit {
		rows = rows[:limit]
		out.next = rows[len(rows)-1].ID.String()
	}
	states, err := s.queuedJobStates(ctx, rows...)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out.Items = append(out.Items, deliveryFromRow(r, states))
	}
	return out, nil
}

// getDelivery serves GET /api/accounts/me/deliveries/{id}: one delivery with its attempts.
func (s *Server) getDelivery(ctx context.Context, req *DeliveryPath) (*DeliveryDetail, error) {
	d, err := s.q.DeliveryGetByID(ctx, s.db, dbsqlc.DeliveryGetByIDParams{ID: req.ID, AccountID: mustCaller(ctx).AccountID})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("delivery")
	}
	if err != nil {
		return nil, err
	}
	atts, err := s.q.DeliveryAttemptListByDelivery(ctx, s.db, d.ID)
	if err != nil {
		return nil, err
	}
	states, err := s.queuedJobStates(ctx, d)
	if err != nil {
		return nil, err
	}
	out := &DeliveryDetail{Delivery: deliveryFromRow(d, states), AttemptLog: make([]DeliveryAttempt, len(atts))}
	for i, a := range atts {
		out.AttemptLog[i] = attemptFromRow(a)
	}
	return out, nil
}

// retryDelivery serves POST /api/accounts/me/deliveries/{id}/retry: push a delivery again now (deliveries.Retry).
func (s *Server) retryDelivery(ctx context.Context, req *DeliveryPath) (*Delivery, error) {
	row, err := deliveries.Retry(ctx, s.db, s.deps.River, mustCaller(ctx).AccountID, req.ID, s.now)
	if err != nil {
		return nil, retryError(err)
	}
	out := deliveryFromRow(row, nil)
	return &out, nil
}

// retryError maps the reasons deliveries.Retry refuses to their answers.
func retryError(err error) error {
	switch {
	case errors.Is(err, deliveries.ErrNotFound):
		return NotFound("delivery")
	case errors.Is(err, deliveries.ErrSubscriptionDisabled):
		return Conflict("the delivery's subscription is disabled; enable it (PATCH enabled=true) before retrying")
	case errors.Is(err, deliveries.ErrInFlight):
		return Conflict("the delivery is already queued or being pushed")
	case errors.Is(err, deliveries.ErrAlreadyQueued):
		return Conflict("the delivery is already queued")
	case errors.Is(err, deliveries.ErrJobFinishing):
		return Conflict("the delivery's last attempt is still being recorded; retry in a moment")
	}
	return err
}

// fillDashboardWebhooks counts the account's deliveries that need
// attention: queued, retrying and failed.
func (s *Server) fillDashboardWebhooks(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	c, err := s.q.DeliveryCountOpen(ctx, s.db, account)
	if err != nil {
		return err
	}
	out.Deliveries = DashboardWebhooks{Pending: c.Pending, Retrying: c.Retrying, Failed: c.Failed}
	return nil
}
