package reports

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/tlsrpt"
)

// tlsClaimRetention is how long a TLS report's ingress claim is kept: long
// enough for its parse job to have stored it in tls_reports, whose unique
// key then answers a re-post. The same horizon as the email webhook ids
// sharing the table (receivers.webhookIDRetention).
const tlsClaimRetention = time.Hour

// errClaimed rolls back a re-post's transaction.
var errClaimed = errors.New("TLS report already received")

// TLSClaimKey is the ingress claim of a TLS report: its dedupe key
// (domain, organization, report-id), hashed to a bounded text.
func TLSClaimKey(domainID uuid.UUID, r *tlsrpt.Report) string {
	h := sha256.Sum256([]byte(r.OrganizationName + "\x00" + r.ReportID))
	return "tlsrpt:" + domainID.String() + ":" + hex.EncodeToString(h[:])
}

// ReceiveTLSReport stores a TLS report posted to the HTTPS ingress, parsed
// (and so validated) by the caller, unless the domain received the same
// report (organization and report-id) before: then it answers the message
// that stored it first and duplicate true, and stores nothing. A stored
// report is claimed in ingress_webhook_ids in the same transaction, so two
// concurrent posts of one report store it once; after the claim's hour the
// tls_reports row its job stored answers.
func (s *Service) ReceiveTLSReport(ctx context.Context, db dbutil.Executor, in Incoming, r *tlsrpt.Report, now time.Time) (rec Received, duplicate bool, err error) {
	key := dbsqlc.TLSReportMessageIDByKeyParams{DomainID: in.DomainID, OrgName: r.OrganizationName, ReportID: r.ReportID}
	if id, err := q.TLSReportMessageIDByKey(ctx, db, key); err == nil {
		return Received{MessageID: id}, true, nil
	} else if !dbutil.IsNotFound(err) {
		return Received{}, false, fmt.Errorf("error looking up TLS report: %w", err)
	}
	claim := TLSClaimKey(in.DomainID, r)
	rec, err = dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (Received, error) {
		rec, err := s.Receive(ctx, tx, in)
		if err != nil {
			return Received{}, err
		}
		if err := q.IngressWebhookIDPurge(ctx, tx, now.Add(-tlsClaimRetention)); err != nil {
			return Received{}, fmt.Errorf("error purging ingress claims: %w", err)
		}
		_, err = q.IngressWebhookIDClaim(ctx, tx, dbsqlc.IngressWebhookIDClaimParams{WebhookID: claim, Outcome: rec.MessageID.String(), ConsumedAt: now})
		if dbutil.IsNotFound(err) {
			return Received{}, errClaimed
		}
		if err != nil {
			return Received{}, fmt.Errorf("error claiming TLS report: %w", err)
		}
		return rec, nil
	})
	if !errors.Is(err, errClaimed) {
		return rec, false, err
	}
	// Another post of the report won; its claim names the message.
	first, err := q.IngressWebhookIDGet(ctx, db, claim)
	if err != nil {
		return Received{}, false, fmt.Errorf("error reading TLS report claim: %w", err)
	}
	id, err := uuid.Parse(first)
	if err != nil {
		return Received{}, false, fmt.Errorf("TLS report claim %q holds no message id", claim)
	}
	return Received{MessageID: id}, true, nil
}
