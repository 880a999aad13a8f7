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
	// inserted: stored now (not a duplicate); suppressed: its recipient
	// was suppressed now.
	inserted, suppressed bool
}

// processBatch normalises payloads in tx: each is read and parsed, then
// one statement stores every event, suppresses and marks the payloads
// processed (MessageEventNormalise). The rollup triggers of message_events
// thus run once and take the account's counters in one ordered sweep, held
// only until the transaction commits: concurrent batches of one account
// wait for each other briefly instead of deadlocking, and a batch costs one
// statement instead of a few per event.
func processBatch(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, now time.Time) ([]Processed, error) {
	pending := make([]*pendingPayload, len(ids))
	for i, id := range ids {
		p, err := preparePayload(ctx, tx, id, now)
		if err != nil {
			return nil, err
		}
		pending[i] = p
	}
	if err := storeEvents(ctx, tx, pending, now); err != nil {
		return nil, err
	}
	out := make([]Processed, len(ids))
	for i, p := range pending {
		for _, e := range p.events {
			switch {
			case !e.inserted:
				p.out.Duplicates++
			case e.suppressed:
				p.out.Inserted++
				p.out.Suppressed++
			default:
				p.out.Inserted++
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

// storeEvents runs MessageEventNormalise for the payloads with events to
// store (none is a payload gone, done or unreadable) and marks each event
// stored or not, and suppressing or not.
func storeEvents(ctx context.Context, tx pgx.Tx, pending []*pendingPayload, now time.Time) error {
	var all []*pendingEvent
	arg := dbsqlc.MessageEventNormaliseParams{Now: now}
	for _, p := range pending {
		if p.events == nil {
			continue
		}
		arg.ProcessedIds = append(arg.ProcessedIds, p.id)
		for i := range p.events {
			all = append(all, &p.events[i])
		}
	}
	if len(arg.ProcessedIds) == 0 {
		return nil
	}
	seq := make(map[*pendingEvent]int32, len(all))
	for i, e := range all {
		seq[e] = int32(i)
	}
	slices.SortStableFunc(all, func(a, b *pendingEvent) int {
		return cmp.Or(bytes.Compare(a.payload.prov.ID[:], b.payload.prov.ID[:]), cmp.Compare(a.event.ID, b.event.ID))
	})
	for _, e := range all {
		appendEvent(&arg, e, seq[e])
	}
	rows, err := dbsqlc.New().MessageEventNormalise(ctx, tx, arg)
	if err != nil {
		return fmt.Errorf("error storing message events: %w", err)
	}
	stored := make(map[uuid.UUID]bool, len(rows))
	for _, r := range rows {
		stored[r.ID] = r.Suppressed
	}
	for _, e := range all {
		e.suppressed, e.inserted = stored[e.id]
	}
	return nil
}

// appendEvent adds e to the statement's arrays.
func appendEvent(arg *dbsqlc.MessageEventNormaliseParams, e *pendingEvent, seq int32) {
	p, ev := e.payload, e.event
	domainID := uuid.Nil
	if e.domainID != nil {
		domainID = *e.domainID
	}
	reason := ""
	switch {
	case ev.Type == esp.TypeBounced && ev.Bounce == esp.BounceHard:
		reason = ReasonHardBounce
	case ev.Type == esp.TypeComplained:
		reason = ReasonComplaint
	}
	arg.Ids = append(arg.Ids, e.id)
	arg.AccountIds = append(arg.AccountIds, p.prov.AccountID)
	arg.ProviderIds = append(arg.ProviderIds, p.prov.ID)
	arg.ProviderKinds = append(arg.ProviderKinds, p.prov.Kind)
	arg.PayloadIds = append(arg.PayloadIds, p.id)
	arg.EventIds = append(arg.EventIds, ev.ID)
	arg.MessageIds = append(arg.MessageIds, ev.MessageID)
	arg.EventTypes = append(arg.EventTypes, string(ev.Type))
	arg.BounceClasses = append(arg.BounceClasses, ev.Bounce)
	arg.Recipients = append(arg.Recipients, ev.Recipient)
	arg.RecipientHashes = append(arg.RecipientHashes, e.hash[:])
	arg.Domains = append(arg.Domains, e.domain)
	arg.DomainIds = append(arg.DomainIds, domainID)
	arg.Classifications = append(arg.Classifications, ev.Classification)
	arg.Details = append(arg.Details, ev.Detail)
	arg.OccurredAts = append(arg.OccurredAts, ev.Timestamp)
	arg.SuppressionIds = append(arg.SuppressionIds, uuid.Must(uuid.NewV7()))
	arg.Reasons = append(arg.Reasons, reason)
	arg.Emails = append(arg.Emails, esp.Clip(ev.Recipient, 320))
	arg.Seqs = append(arg.Seqs, seq)
}
