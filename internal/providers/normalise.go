package providers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/esp/mailgun"
	"github.com/mailwatch/mailwatch/internal/esp/postmark"
	"github.com/mailwatch/mailwatch/internal/esp/resend"
	"github.com/mailwatch/mailwatch/internal/esp/sendgrid"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/pgtext"
)

// ParsePayload normalises a stored payload of kind into events.
func ParsePayload(kind string, body []byte, headerEventID string) ([]esp.Event, error) {
	switch kind {
	case KindSendGrid:
		return sendgrid.Parse(body)
	case KindMailgun:
		return mailgun.Parse(body)
	case KindResend:
		return resend.Parse(body, headerEventID)
	case KindPostmark:
		return postmark.Parse(body)
	case KindSES:
		return ses.Parse(body)
	}
	return nil, fmt.Errorf("unknown provider kind %q", kind)
}

// Processed is what normalising one payload did.
type Processed struct {
	// Inserted counts new message events (duplicates are skipped).
	Inserted int
	// Duplicates counts events whose provider event id was stored before.
	Duplicates int
	// Suppressed counts new suppression entries.
	Suppressed int
	// Gone is true when the payload or its provider no longer exists.
	Gone bool
	// Done is true when the payload had been processed before: nothing
	// was done.
	Done bool
}

type linkedDomain struct {
	id   uuid.UUID
	name string
}

// resolveDomain picks the sending domain of an event: the linked domain
// equal to the sender's domain or a parent of it; with no sender, the
// provider's only linked domain. Otherwise the sender's domain, unlinked.
func resolveDomain(links []linkedDomain, sender string) (name string, id *uuid.UUID) {
	sd := esp.SenderDomain(sender)
	if sd == "" {
		if len(links) == 1 {
			return links[0].name, &links[0].id
		}
		return "", nil
	}
	best := -1
	for i, l := range links {
		if sd == l.name || strings.HasSuffix(sd, "."+l.name) {
			if best < 0 || len(l.name) > len(links[best].name) {
				best = i
			}
		}
	}
	if best < 0 {
		return sd, nil
	}
	return links[best].name, &links[best].id
}

// ProcessPayload normalises one stored payload in tx: one message event per
// recipient event (deduplicated by the provider's event id), a suppression
// entry for each new hard bounce and complaint, and the payload marked
// processed. A payload processed before is left alone; re-running one
// whose processed_at was cleared converges: everything it writes is keyed.
// A batch of payloads is normalised with ProcessPayloads, which isolates
// each payload's failure.
func ProcessPayload(ctx context.Context, tx pgx.Tx, payloadID uuid.UUID, now time.Time) (Processed, error) {
	q := dbsqlc.New()
	pl, err := q.ProviderPayloadGetByID(ctx, tx, payloadID)
	if dbutil.IsNotFound(err) {
		return Processed{Gone: true}, nil
	}
	if err != nil {
		return Processed{}, fmt.Errorf("error reading payload: %w", err)
	}
	if pl.ProcessedAt != nil {
		return Processed{Done: true}, nil
	}
	prov, err := q.ProviderGetForIngress(ctx, tx, pl.ProviderID)
	if dbutil.IsNotFound(err) {
		// Stored while the provider was being deleted (provider_payloads
		// has no foreign key, 0017): it belongs to nobody now.
		if err := q.ProviderPayloadDeleteOrphan(ctx, tx, pl.ID); err != nil {
			return Processed{}, fmt.Errorf("error deleting an orphaned payload: %w", err)
		}
		return Processed{Gone: true}, nil
	}
	if err != nil {
		return Processed{}, fmt.Errorf("error reading provider: %w", err)
	}
	hdr := ""
	if pl.HeaderEventID != nil {
		hdr = *pl.HeaderEventID
	}
	evs, perr := ParsePayload(prov.Kind, pl.Body, hdr)
	if perr != nil {
		// A verified body we cannot read is kept with its error for an
		// operator; retrying will not help.
		msg := esp.Clip(pgtext.Clean(perr.Error()), maxPayloadError)
		return Processed{}, q.ProviderPayloadMarkProcessed(ctx, tx, dbsqlc.ProviderPayloadMarkProcessedParams{ID: pl.ID, Now: now, Events: 0, Error: &msg})
	}
	rows, err := q.ProviderLinkListDomains(ctx, tx, prov.ID)
	if err != nil {
		return Processed{}, fmt.Errorf("error reading linked domains: %w", err)
	}
	links := make([]linkedDomain, len(rows))
	for i, r := range rows {
		links[i] = linkedDomain{id: r.ID, name: r.Name}
	}
	var out Processed
	for _, e := range evs {
		name, domainID := resolveDomain(links, e.Sender)
		var bounce, detail *string
		if e.Bounce != "" {
			bounce = &e.Bounce
		}
		if e.Detail != "" {
			detail = &e.Detail
		}
		hash := RecipientHash(e.Recipient)
		id, err := q.MessageEventInsert(ctx, tx, dbsqlc.MessageEventInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: prov.AccountID, ProviderID: prov.ID, ProviderKind: prov.Kind,
			PayloadID: &pl.ID, EventID: e.ID, MessageID: e.MessageID, EventType: string(e.Type), BounceClass: bounce,
			Recipient: e.Recipient, RecipientHash: hash[:], Domain: name, DomainID: domainID, Unlinked: domainID == nil,
			Classification: e.Classification, Detail: detail, OccurredAt: e.Timestamp,
		})
		if dbutil.IsNotFound(err) {
			out.Duplicates++
			continue
		}
		if err != nil {
			return Processed{}, fmt.Errorf("error inserting message event: %w", err)
		}
		out.Inserted++
		reason := ""
		switch {
		case e.Type == esp.TypeBounced && e.Bounce == esp.BounceHard:
			reason = ReasonHardBounce
		case e.Type == esp.TypeComplained:
			reason = ReasonComplaint
		}
		if reason == "" {
			continue
		}
		var dom *string
		if name != "" {
			dom = &name
		}
		_, err = q.SuppressionInsert(ctx, tx, dbsqlc.SuppressionInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: prov.AccountID, Email: esp.Clip(e.Recipient, 320), EmailHash: hash[:],
			Reason: reason, Domain: dom, ProviderID: &prov.ID, SourceEventID: &id,
		})
		switch {
		case dbutil.IsNotFound(err): // already suppressed
		case err != nil:
			return Processed{}, fmt.Errorf("error inserting suppression: %w", err)
		default:
			out.Suppressed++
		}
	}
	if err := q.ProviderPayloadMarkProcessed(ctx, tx, dbsqlc.ProviderPayloadMarkProcessedParams{ID: pl.ID, Now: now, Events: int32(out.Inserted)}); err != nil {
		return Processed{}, fmt.Errorf("error marking payload processed: %w", err)
	}
	return out, nil
}
