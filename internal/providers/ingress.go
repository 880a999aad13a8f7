package providers

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/esp/mailgun"
	"github.com/mailwatch/mailwatch/internal/esp/postmark"
	"github.com/mailwatch/mailwatch/internal/esp/resend"
	"github.com/mailwatch/mailwatch/internal/esp/sendgrid"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/pgtext"
)

// Request is one webhook request as the ingress route saw it.
type Request struct {
	// Header returns a request header ("" when absent).
	Header   func(name string) string
	Body     []byte
	ClientIP string
	Now      time.Time
	// MaxAge is PROVIDER_WEBHOOK_MAX_AGE (0: no timestamp window).
	MaxAge time.Duration
}

// Verified is what verification learnt about a request.
type Verified struct {
	// ReplayKey makes the request unique for its scheme.
	ReplayKey string
	// HeaderEventID is the provider's event id carried in a header.
	HeaderEventID string
	// Confirmation is true for an SNS SubscriptionConfirmation.
	Confirmation bool
	// Ignore is true for a verified message that carries no events and
	// needs no work (an SNS UnsubscribeConfirmation).
	Ignore bool
}

// ErrReplayMismatch means a replay key (a Mailgun token, a Svix message id,
// an SNS MessageId) came back with another body: a forgery, refused like a
// bad signature. The error returned is a *ReplayMismatchError naming the
// key as the provider calls it.
var ErrReplayMismatch = fmt.Errorf("%w: replay key already used with another body", esp.ErrSignature)

// ReplayMismatchError is ErrReplayMismatch for a provider kind.
type ReplayMismatchError struct {
	Kind string
}

func (e *ReplayMismatchError) Error() string {
	return "this " + replayKeyName(e.Kind) + " was already used with another body"
}

// Unwrap makes the error ErrReplayMismatch (and so esp.ErrSignature).
func (e *ReplayMismatchError) Unwrap() error { return ErrReplayMismatch }

// replayKeyName names what makes a request of kind unique, as the
// provider's documentation calls it (Verify sets the replay keys).
func replayKeyName(kind string) string {
	switch kind {
	case KindMailgun:
		return "Mailgun token (signature.token)"
	case KindResend:
		return "Resend message id (svix-id)"
	case KindSES:
		return "SNS MessageId"
	}
	return "request" // keyed by the body's hash: a mismatch cannot happen
}

// Verify checks a request's signature (or credentials) for provider row p
// whose config is cfg. Errors wrap esp.ErrSignature (401), esp.ErrPayload
// (400) or ses.ErrCertificate (503, SNS retries).
func Verify(ctx context.Context, p *dbsqlc.SendingProvider, cfg Config, certs ses.CertFetcher, r Request) (Verified, error) {
	bodyKey := func() string {
		h := sha256.Sum256(r.Body)
		return "sha256:" + hex.EncodeToString(h[:])
	}
	switch p.Kind {
	case KindSendGrid:
		var key *ecdsa.PublicKey
		if cfg.parsed != nil && cfg.parsed.sendgridKey != nil {
			key = cfg.parsed.sendgridKey
		} else {
			var err error
			if key, err = sendgrid.ParsePublicKey(cfg.PublicKey); err != nil {
				return Verified{}, fmt.Errorf("stored SendGrid key: %w", err)
			}
		}
		sig, ts := r.Header(sendgrid.HeaderSignature), r.Header(sendgrid.HeaderTimestamp)
		if err := sendgrid.Verify(key, sig, ts, r.Body, r.Now, r.MaxAge); err != nil {
			return Verified{}, err
		}
		// Each event carries its own id; the batch is deduplicated by body.
		return Verified{ReplayKey: bodyKey()}, nil
	case KindMailgun:
		pl, err := mailgun.ParsePayload(r.Body)
		if err != nil {
			return Verified{}, err
		}
		if err := mailgun.Verify(cfg.SigningKey, pl.Signature, r.Now, r.MaxAge); err != nil {
			return Verified{}, err
		}
		return Verified{ReplayKey: "token:" + pl.Signature.Token}, nil
	case KindResend:
		h := resend.Headers{ID: r.Header(resend.HeaderID), Timestamp: r.Header(resend.HeaderTimestamp), Signature: r.Header(resend.HeaderSignature)}
		if err := resend.Verify(cfg.SigningSecret, h, r.Body, r.Now, r.MaxAge); err != nil {
			return Verified{}, err
		}
		return Verified{ReplayKey: "svix:" + h.ID, HeaderEventID: h.ID}, nil
	case KindPostmark:
		var allowed []netip.Prefix
		if cfg.parsed != nil {
			allowed = cfg.parsed.postmarkAllow
		} else {
			var err error
			if allowed, err = postmark.ParseAllowList(cfg.AllowedIPs); err != nil {
				return Verified{}, fmt.Errorf("stored Postmark allow-list: %w", err)
			}
		}
		if err := postmark.Verify(cfg.BasicAuthUser, cfg.BasicAuthPassword, r.Header("Authorization"), r.ClientIP, allowed); err != nil {
			return Verified{}, err
		}
		return Verified{ReplayKey: bodyKey()}, nil
	case KindSES:
		env, err := ses.ParseEnvelope(r.Body)
		if err != nil {
			return Verified{}, err
		}
		if err := ses.Verify(ctx, env, certs, cfg.TopicARNs, r.Now, r.MaxAge); err != nil {
			return Verified{}, err
		}
		return Verified{
			ReplayKey:    "sns:" + env.MessageID,
			Confirmation: env.Type == ses.TypeSubscriptionConfirmation,
			Ignore:       env.Type == ses.TypeUnsubscribeConfirmation,
		}, nil
	}
	return Verified{}, fmt.Errorf("unknown provider kind %q", p.Kind)
}

// Stored is the outcome of storing a verified payload.
type Stored struct {
	PayloadID uuid.UUID
	// Duplicate is true when the same request was stored before: nothing
	// new was stored and no job is needed.
	Duplicate bool
}

// storableKey returns s when Postgres text can hold it and it is short,
// else a hash of it: a key is compared, never shown.
func storableKey(s string) string {
	if len(s) <= 512 && pgtext.Check(s) == nil {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// IsSignatureError reports whether err is the caller's 401.
func IsSignatureError(err error) bool { return errors.Is(err, esp.ErrSignature) }

// IsPayloadError reports whether err is the caller's 400.
func IsPayloadError(err error) bool { return errors.Is(err, esp.ErrPayload) }
