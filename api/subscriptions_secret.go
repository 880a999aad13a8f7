package api

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/subscriptions"
)

// RotateSecretRequest is the body of POST .../event-subscriptions/{id}/secret/rotate.
type RotateSecretRequest struct {
	ID                 uuid.UUID `path:"id" format:"uuid"`
	GracePeriodSeconds *int64    `json:"grace_period_seconds,omitempty" validate:"omitempty,min=0,max=604800" description:"How long the replaced secret keeps signing beside the new one: 0 retires it at once, at most 604800 (7 days). Omitted: 86400 (24 hours)."`
	SigningSecret      *string   `json:"signing_secret,omitempty" validate:"omitempty,max=128" description:"The new whsec_ secret (standard base64 of 24 to 64 bytes). Omitted: one is generated."`
}

// RotatedSecret is the answer to a rotation: the new secret, shown once.
type RotatedSecret struct {
	Subscription
	SigningSecret string `json:"signing_secret" validate:"required" description:"The new whsec_ secret. Shown only in this response; stored encrypted."`
}

func (s *Server) secretRoutes(base string) {
	s.ops.RotateSecret = Handle(s.router, Endpoint[RotateSecretRequest, RotatedSecret]{
		Method: "POST", Path: base + "/{id}/secret/rotate", OperationID: "rotateEventSubscriptionSecret", Tag: "event subscriptions",
		Errors:  []int{404},
		Summary: "Rotate the signing secret, with an overlap",
		Description: "Replaces the subscription's signing secret and returns the new one, once. During the grace period " +
			"(grace_period_seconds, default 24 hours, at most 7 days) every push carries two signatures in webhook-signature, " +
			"one under the new secret and one under the replaced one, so a receiver verifying with either accepts it; then the " +
			"replaced secret is retired. Rotating again during a grace period retires the oldest secret at once. Audited as " +
			"subscription_secret_rotated.",
		Call: s.rotateSecret,
	})
}

// rotateSecret serves POST /api/accounts/me/event-subscriptions/{id}/secret/rotate: rotate the signing secret, with an overlap.
func (s *Server) rotateSecret(ctx context.Context, req *RotateSecretRequest) (*RotatedSecret, error) {
	caller := mustCaller(ctx)
	r := subscriptions.Rotation{SigningSecret: req.SigningSecret, KeyIdentifier: caller.KeyIdentifier}
	if req.GracePeriodSeconds != nil {
		g := time.Duration(*req.GracePeriodSeconds) * time.Second
		r.Grace = &g
	}
	out, err := s.subscriptionService().Rotate(ctx, s.db, s.deps.Emitter, caller.AccountID, req.ID, r, s.now())
	if err != nil {
		return nil, subscriptionError(err)
	}
	return &RotatedSecret{Subscription: subscriptionFromRow(out.Sub), SigningSecret: out.Secret}, nil
}
