package providers

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
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
	out, err := processBatch(ctx, tx, []uuid.UUID{payloadID}, now)
	if err != nil {
		return Processed{}, err
	}
	return out[0], nil
}

// pendingPayload is a payload read and parsed, whose events are to be
// stored.
type pendingPayload struct {
	id     uuid.UUID
	prov   dbsqlc.SendingProvider
	events []pendingEvent
	out    Processed
}

// pendingEvent is one event of a pendingPayload.
type pendingEvent struct {
	payload  *pendingPayload
	id       uuid.UUID
	event    esp.Event
	domain   string
	domainID *uuid.UUID
	hash     [32]byte
	inserted bool
}

// processBatch normalises payloads in tx with one insert of all their
// events: the rollup triggers of message_events then run once and take
// their counters in one ordered sweep, so concurrent batches of one account
// wait for each other instead of deadlocking, and a batch costs one
// statement instead of one per event.
func processBatch(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, now time.Time) ([]Processed, error) {
	pending := make([]*pendingPayload, len(ids))
	for i, id := range ids {
		p, err := preparePayload(ctx, tx, id, now)
		if err != nil {
			return nil, err
		}
		pending[i] = p
	}
	if err := insertEvents(ctx, tx, pending); err != nil {
		return nil, err
	}
	out := make([]Processed, len(ids))
	for i, p := range pending {
		if p.events != nil {
			if err := finishPayload(ctx, tx, p, now); err != nil {
				return nil, err
			}
		}
		out[i] = p.out
	}
	return out, nil
}

// preparePayload reads and parses a payload. A payload gone, done or
// unreadable (marked processed with its error) has no events to store
// (events nil).
func preparePayload(ctx context.Context, tx pgx.Tx, payloadID uuid.UUID, now time.Time) (*pendingPayload, error) {
	q := dbsqlc.New()
	p := &pendingPayload{id: payloadID}
	pl, err := q.ProviderPayloadGetByID(ctx, tx, payloadID)
	if dbutil.IsNotFound(err) {
		p.out.Gone = true
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading payload: %w", err)
	}
	if pl.ProcessedAt != nil {
		p.out.Done = true
		return p, nil
	}
	p.prov, err = q.ProviderGetForIngress(ctx, tx, pl.ProviderID)
	if dbutil.IsNotFound(err) {
		// Stored while the provider was being deleted (provider_payloads
		// has no foreign key, 0017): it belongs to nobody now.
		if err := q.ProviderPayloadDeleteOrphan(ctx, tx, pl.ID); err != nil {
			return nil, fmt.Errorf("error deleting an orphaned payload: %w", err)
		}
		p.out.Gone = true
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading provider: %w", err)
	}
	hdr := ""
	if pl.HeaderEventID != nil {
		hdr = *pl.HeaderEventID
	}
	evs, perr := ParsePayload(p.prov.Kind, pl.Body, hdr)
	if perr != nil {
		// A verified body we cannot read is kept with its error for an
		// operator; retrying will not help.
		msg := esp.Clip(pgtext.Clean(perr.Error()), maxPayloadError)
		return p, q.ProviderPayloadMarkProcessed(ctx, tx, dbsqlc.ProviderPayloadMarkProcessedParams{ID: pl.ID, Now: now, Events: 0, Error: &msg})
	}
	rows, err := q.ProviderLinkListDomains(ctx, tx, p.prov.ID)
	if err != nil {
		return nil, fmt.Errorf("error reading linked domains: %w", err)
	}
	links := make([]linkedDomain, len(rows))
	for i, r := range rows {
		links[i] = linkedDomain{id: r.ID, name: r.Name}
	}
	p.events = make([]pendingEvent, len(evs))
	for i, e := range evs {
		name, domainID := resolveDomain(links, e.Sender)
		p.events[i] = pendingEvent{payload: p, id: uuid.Must(uuid.NewV7()), event: e, domain: name, domainID: domainID, hash: RecipientHash(e.Recipient)}
	}
	return p, nil
}

// insertEvents stores the events of every payload in one statement,
// ordered by provider and event id (an event sent twice is stored from its
// first payload), and marks those stored.
func insertEvents(ctx context.Context, tx pgx.Tx, pending []*pendingPayload) error {
	var all []*pendingEvent
	for _, p := range pending {
		for i := range p.events {
			all = append(all, &p.events[i])
		}
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(a, b *pendingEvent) int {
		return cmp.Or(bytes.Compare(a.payload.prov.ID[:], b.payload.prov.ID[:]), cmp.Compare(a.event.ID, b.event.ID))
	})
	n := len(all)
	arg := dbsqlc.MessageEventInsertManyParams{
		Ids: make([]uuid.UUID, n), AccountIds: make([]uuid.UUID, n), ProviderIds: make([]uuid.UUID, n),
		ProviderKinds: make([]string, n), PayloadIds: make([]uuid.UUID, n), EventIds: make([]string, n),
		MessageIds: make([]string, n), EventTypes: make([]string, n), BounceClasses: make([]string, n),
		Recipients: make([]string, n), RecipientHashes: make([][]byte, n), Domains: make([]string, n),
		DomainIds: make([]uuid.UUID, n), Classifications: make([]string, n), Details: make([]string, n),
		OccurredAts: make([]time.Time, n),
	}
	for i, e := range all {
		p := e.payload
		arg.Ids[i], arg.AccountIds[i], arg.ProviderIds[i], arg.ProviderKinds[i] = e.id, p.prov.AccountID, p.prov.ID, p.prov.Kind
		arg.PayloadIds[i], arg.EventIds[i], arg.MessageIds[i], arg.EventTypes[i] = p.id, e.event.ID, e.event.MessageID, string(e.event.Type)
		arg.BounceClasses[i], arg.Recipients[i], arg.RecipientHashes[i], arg.Domains[i] = e.event.Bounce, e.event.Recipient, e.hash[:], e.domain
		if e.domainID != nil {
			arg.DomainIds[i] = *e.domainID
		}
		arg.Classifications[i], arg.Details[i], arg.OccurredAts[i] = e.event.Classification, e.event.Detail, e.event.Timestamp
	}
	stored, err := dbsqlc.New().MessageEventInsertMany(ctx, tx, arg)
	if err != nil {
		return fmt.Errorf("error inserting message events: %w", err)
	}
	ok := make(map[uuid.UUID]bool, len(stored))
	for _, id := range stored {
		ok[id] = true
	}
	for _, e := range all {
		e.inserted = ok[e.id]
	}
	return nil
}

// finishPayload counts a payload's events, suppresses the recipients of
// its new hard bounces and complaints, and marks it processed.
func finishPayload(ctx context.Context, tx pgx.Tx, p *pendingPayload, now time.Time) error {
	q := dbsqlc.New()
	for i := range p.events {
		e := &p.events[i]
		if !e.inserted {
			p.out.Duplicates++
			continue
		}
		p.out.Inserted++
		reason := ""
		switch {
		case e.event.Type == esp.TypeBounced && e.event.Bounce == esp.BounceHard:
			reason = ReasonHardBounce
		case e.event.Type == esp.TypeComplained:
			reason = ReasonComplaint
		}
		if reason == "" {
			continue
		}
		var dom *string
		if e.domain != "" {
			dom = &e.domain
		}
		_, err := q.SuppressionInsert(ctx, tx, dbsqlc.SuppressionInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: p.prov.AccountID, Email: esp.Clip(e.event.Recipient, 320), EmailHash: e.hash[:],
			Reason: reason, Domain: dom, ProviderID: &p.prov.ID, SourceEventID: &e.id,
		})
		switch {
		case dbutil.IsNotFound(err): // already suppressed
		case err != nil:
			return fmt.Errorf("error inserting suppression: %w", err)
		default:
			p.out.Suppressed++
		}
	}
	if err := q.ProviderPayloadMarkProcessed(ctx, tx, dbsqlc.ProviderPayloadMarkProcessedParams{ID: p.id, Now: now, Events: int32(p.out.Inserted)}); err != nil {
		return fmt.Errorf("error marking payload processed: %w", err)
	}
	return nil
}
