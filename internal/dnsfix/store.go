package dnsfix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsprovider"
	"github.com/mailwatch/mailwatch/internal/events"
)

// RecFromRow rebuilds the rule's view of a stored recommendation.
func RecFromRow(r dbsqlc.DnsRecommendation) Rec {
	return Rec{Key: r.Key, Check: r.CheckName, Severity: r.Severity, Name: r.Name, Type: r.Rtype, Current: r.Current, Proposed: r.Proposed, Why: r.Why, Manual: r.Manual}
}

// Recompute stores the recommendations computed from the domain's known
// results (in tx, after the check that produced them): new ones open,
// changed ones update, ones no longer computed are deleted. A dismissed
// recommendation stays dismissed while what it was computed from (its
// fingerprint) is unchanged and its until has not passed, and reopens
// otherwise; one being applied is left alone; an applied or failed one
// keeps its state until the observation changes.
func Recompute(ctx context.Context, tx pgx.Tx, domain dbsqlc.Domain, known *dnscheck.Results, in Inputs, now time.Time) ([]dbsqlc.DnsRecommendation, error) {
	q := dbsqlc.New()
	existing, err := q.DNSRecommendationListByDomainForUpdate(ctx, tx, domain.ID)
	if err != nil {
		return nil, fmt.Errorf("error reading recommendations: %w", err)
	}
	byKey := map[string]dbsqlc.DnsRecommendation{}
	for _, r := range existing {
		byKey[r.Key] = r
	}
	computed := Compute(domain.Name, known, in)
	seen := map[string]bool{}
	var out []dbsqlc.DnsRecommendation
	for _, c := range computed {
		seen[c.Key] = true
		fp := c.Fingerprint()
		state := StateOpen
		id := uuid.Must(uuid.NewV7())
		if ex, ok := byKey[c.Key]; ok {
			id = ex.ID
			switch ex.State {
			case StateApplying:
				out = append(out, ex)
				continue
			case StateDismissed:
				if ex.DismissedFingerprint != nil && *ex.DismissedFingerprint == fp && (ex.DismissedUntil == nil || ex.DismissedUntil.After(now)) {
					state = StateDismissed
				}
			case StateApplied, StateFailed:
				if ex.Fingerprint == fp {
					state = ex.State
				}
			}
		}
		row, err := q.DNSRecommendationUpsert(ctx, tx, dbsqlc.DNSRecommendationUpsertParams{
			ID: id, DomainID: domain.ID, Key: c.Key, CheckName: c.Check, Severity: c.Severity, Name: c.Name, Rtype: c.Type,
			Op: c.Op(), Current: nonNil(c.Current), Proposed: nonNil(c.Proposed), Why: c.Why, Manual: c.Manual, Fingerprint: fp, State: state,
		})
		if err != nil {
			return nil, fmt.Errorf("error storing recommendation %s: %w", c.Key, err)
		}
		out = append(out, row)
	}
	for _, ex := range existing {
		if !seen[ex.Key] && ex.State != StateApplying {
			if err := q.DNSRecommendationDelete(ctx, tx, ex.ID); err != nil {
				return nil, fmt.Errorf("error deleting recommendation %s: %w", ex.Key, err)
			}
		}
	}
	return out, nil
}

func getRec(ctx context.Context, tx pgx.Tx, domainID, id uuid.UUID) (dbsqlc.DnsRecommendation, error) {
	r, err := dbsqlc.New().DNSRecommendationGetForUpdate(ctx, tx, dbsqlc.DNSRecommendationGetForUpdateParams{ID: id, DomainID: domainID})
	if dbutil.IsNotFound(err) {
		return r, ErrNotFound
	}
	return r, err
}

// Dismiss hides a recommendation until what it was computed from changes
// or until passes (when given).
func Dismiss(ctx context.Context, tx pgx.Tx, domainID, id uuid.UUID, reason string, until *time.Time, now time.Time) (dbsqlc.DnsRecommendation, error) {
	r, err := getRec(ctx, tx, domainID, id)
	if err != nil {
		return r, err
	}
	if r.State == StateApplying {
		return r, fmt.Errorf("%w: it is being applied", ErrState)
	}
	if until != nil && !until.After(now) {
		return r, &FieldError{Field: "until", Message: "must be in the future"}
	}
	var u *time.Time
	if until != nil {
		t := until.UTC()
		u = &t
	}
	return dbsqlc.New().DNSRecommendationSetState(ctx, tx, dbsqlc.DNSRecommendationSetStateParams{ID: id, State: StateDismissed, DismissedReason: &reason, DismissedUntil: u})
}

// Restore reopens a dismissed recommendation.
func Restore(ctx context.Context, tx pgx.Tx, domainID, id uuid.UUID) (dbsqlc.DnsRecommendation, error) {
	r, err := getRec(ctx, tx, domainID, id)
	if err != nil {
		return r, err
	}
	if r.State != StateDismissed {
		return r, fmt.Errorf("%w: it is not dismissed", ErrState)
	}
	return dbsqlc.New().DNSRecommendationSetState(ctx, tx, dbsqlc.DNSRecommendationSetStateParams{ID: id, State: StateOpen})
}

// StartApply moves an open (or failed) recommendation to applying in tx
// and calls enqueue, in the same transaction, to queue the job that
// writes it. fingerprint, when given, must be the recommendation's
// (*ConflictError otherwise, with the record now observed). Without a
// linked connection it returns ErrNoConnection; a manual one ErrManual.
func StartApply(ctx context.Context, tx pgx.Tx, domainID, id uuid.UUID, fingerprint string, enqueue func(ctx context.Context, tx pgx.Tx) (int64, error)) (dbsqlc.DnsRecommendation, error) {
	q := dbsqlc.New()
	r, err := getRec(ctx, tx, domainID, id)
	if err != nil {
		return r, err
	}
	if r.Manual {
		return r, ErrManual
	}
	if fingerprint != "" && fingerprint != r.Fingerprint {
		return r, &ConflictError{Current: r.Current}
	}
	switch r.State {
	case StateOpen, StateFailed:
	case StateApplying:
		return r, fmt.Errorf("%w: it is already being applied", ErrState)
	case StateApplied:
		return r, fmt.Errorf("%w: it was applied; the next check will show the result", ErrState)
	default:
		return r, fmt.Errorf("%w: it is dismissed; restore it first", ErrState)
	}
	if _, err := q.DNSConnectionLinkGetByDomain(ctx, tx, domainID); dbutil.IsNotFound(err) {
		return r, ErrNoConnection
	} else if err != nil {
		return r, err
	}
	jobID, err := enqueue(ctx, tx)
	if err != nil {
		return r, err
	}
	return q.DNSRecommendationSetState(ctx, tx, dbsqlc.DNSRecommendationSetStateParams{ID: id, State: StateApplying, JobID: &jobID})
}

// change builds the compare-and-swap for a recommendation from the RRset
// the provider holds now: the records the recommendation is about must
// still be the ones it saw, and the RRset's other records are carried as
// they are (so the provider's precondition covers them too).
func change(rec Rec, now dnsprovider.RRset) (dnsprovider.Change, error) {
	var relevant []string
	for _, v := range now.Values {
		if rec.Selects(v) {
			relevant = append(relevant, v)
		}
	}
	if !dnsprovider.SameSet(relevant, rec.Current) {
		return dnsprovider.Change{}, &ConflictError{Current: nonNil(relevant)}
	}
	c := dnsprovider.Change{Name: rec.Name, Type: rec.Type, TTL: now.TTL, Current: nonNil(now.Values), Remove: rec.Remove(), Add: rec.Add()}
	if c.TTL == 0 {
		c.TTL = dnsprovider.DefaultTTL
	}
	return c, nil
}

// Plan is a dry run: the exact update the apply would send now.
type Plan struct {
	Connection string             `json:"connection_kind"`
	Zone       dnsprovider.Zone   `json:"zone"`
	Change     dnsprovider.Change `json:"change"`
	Request    any                `json:"request"`
}

// linkedProvider opens the domain's linked connection.
func linkedProvider(ctx context.Context, db dbutil.Executor, env *Env, domainID uuid.UUID) (dnsprovider.Provider, dnsprovider.Zone, error) {
	l, err := dbsqlc.New().DNSConnectionLinkGetByDomain(ctx, db, domainID)
	if dbutil.IsNotFound(err) {
		return nil, dnsprovider.Zone{}, ErrNoConnection
	}
	if err != nil {
		return nil, dnsprovider.Zone{}, err
	}
	p, err := env.open(l.ConnectionID, l.Kind, l.SecretCiphertext, l.SecretKeyID)
	return p, dnsprovider.Zone{Name: l.ZoneName, ID: l.ZoneID}, err
}

// DryRun reads the RRset from the provider and returns the update that
// applying the recommendation would send. Nothing is written.
func DryRun(ctx context.Context, db dbutil.Executor, env *Env, rec dbsqlc.DnsRecommendation) (*Plan, error) {
	if rec.Manual {
		return nil, ErrManual
	}
	p, zone, err := linkedProvider(ctx, db, env, rec.DomainID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, env.timeout())
	defer cancel()
	now, err := p.Read(ctx, zone, rec.Name, rec.Rtype)
	if err != nil {
		return nil, providerErr(err)
	}
	c, err := change(RecFromRow(rec), now)
	if err != nil {
		return nil, err
	}
	req, err := p.Plan(zone, c)
	if err != nil {
		return nil, err
	}
	return &Plan{Connection: p.Kind(), Zone: zone, Change: c, Request: req}, nil
}

// ApplyOutcome is what writing a recommendation did.
type ApplyOutcome struct {
	// Skipped is true when the recommendation was not applying (an
	// operator re-ran a finished job): nothing was done.
	Skipped bool
	Rec     dbsqlc.DnsRecommendation
	// Err is the provider's refusal or the conflict; nil when applied.
	Err error
	// Change is what was sent (empty when nothing was).
	Change dnsprovider.Change
	Kind   string
}

// Write sends an applying recommendation's change through the domain's
// connection, outside any transaction. A conflict or a provider's refusal
// is returned in the outcome (final); a network failure as the error, to
// be retried by the job.
func Write(ctx context.Context, db dbutil.Executor, env *Env, id uuid.UUID) (*ApplyOutcome, error) {
	q := dbsqlc.New()
	rec, err := q.DNSRecommendationGetByID(ctx, db, id)
	if dbutil.IsNotFound(err) {
		return &ApplyOutcome{Skipped: true}, nil
	}
	if err != nil {
		return nil, err
	}
	out := &ApplyOutcome{Rec: rec}
	if rec.State != StateApplying {
		out.Skipped = true
		return out, nil
	}
	p, zone, err := linkedProvider(ctx, db, env, rec.DomainID)
	if errors.Is(err, ErrNoConnection) {
		out.Err = err
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	out.Kind = p.Kind()
	ctx, cancel := context.WithTimeout(ctx, env.timeout())
	defer cancel()
	now, err := p.Read(ctx, zone, rec.Name, rec.Rtype)
	if err != nil {
		return finalOrRetry(out, err)
	}
	c, err := change(RecFromRow(rec), now)
	if err != nil {
		out.Err = err
		return out, nil
	}
	out.Change = c
	err = p.Apply(ctx, zone, c)
	var ce *dnsprovider.ConflictError
	if errors.As(err, &ce) {
		var relevant []string
		for _, v := range ce.Current {
			if RecFromRow(rec).Selects(v) {
				relevant = append(relevant, v)
			}
		}
		out.Err = &ConflictError{Current: nonNil(relevant)}
		return out, nil
	}
	if err != nil {
		return finalOrRetry(out, err)
	}
	return out, nil
}

func finalOrRetry(out *ApplyOutcome, err error) (*ApplyOutcome, error) {
	var pe *dnsprovider.ProviderError
	if errors.As(err, &pe) {
		out.Err = &VerifyError{What: pe.What, Message: pe.Message}
		return out, nil
	}
	return nil, err
}

// FixPayload is the payload of dns_fix_applied and dns_fix_failed.
type FixPayload struct {
	Domain           string   `json:"domain"`
	RecommendationID string   `json:"recommendation_id"`
	Check            string   `json:"check"`
	Name             string   `json:"name"`
	Type             string   `json:"type"`
	Op               string   `json:"op"`
	ConnectionKind   string   `json:"connection_kind"`
	Before           []string `json:"before"`
	After            []string `json:"after"`
	Error            string   `json:"error,omitempty"`
	Conflict         bool     `json:"conflict,omitempty"`
}

// Finish records a write's outcome in tx: the recommendation becomes
// applied or failed and dns_fix_applied or dns_fix_failed is emitted with
// the records before and after. writeErr is the outcome's Err or, after
// the job's last attempt, the network error. It returns false when the
// recommendation was no longer applying (nothing recorded).
func Finish(ctx context.Context, tx pgx.Tx, em *events.Emitter, out *ApplyOutcome, writeErr error, now time.Time) (bool, error) {
	q := dbsqlc.New()
	rec, err := q.DNSRecommendationGetByIDForUpdate(ctx, tx, out.Rec.ID)
	if dbutil.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if rec.State != StateApplying {
		return false, nil
	}
	dom, err := q.DomainGetByID(ctx, tx, rec.DomainID)
	if err != nil {
		return false, err
	}
	payload := FixPayload{
		Domain: dom.Name, RecommendationID: rec.ID.String(), Check: rec.CheckName, Name: rec.Name, Type: rec.Rtype, Op: rec.Op,
		ConnectionKind: out.Kind, Before: nonNil(rec.Current), After: nonNil(rec.Proposed),
	}
	if payload.ConnectionKind == "" {
		payload.ConnectionKind = "none"
	}
	state, typ, sev := StateApplied, events.TypeDNSFixApplied, events.Severity("")
	var lastErr *string
	if writeErr != nil {
		state, typ = StateFailed, events.TypeDNSFixFailed
		msg := writeErr.Error()
		lastErr = &msg
		payload.Error = msg
		var ce *ConflictError
		if errors.As(writeErr, &ce) {
			payload.Conflict = true
			payload.After = nonNil(ce.Current)
		} else {
			payload.After = nonNil(rec.Current)
		}
	}
	if _, err := q.DNSRecommendationSetState(ctx, tx, dbsqlc.DNSRecommendationSetStateParams{ID: rec.ID, State: state, LastError: lastErr}); err != nil {
		return false, err
	}
	if _, err := em.Emit(ctx, tx, events.Event{AccountID: dom.AccountID, Type: typ, Domain: dom.Name, Tags: dom.Tags, Severity: sev, At: now, Payload: payload}); err != nil {
		return false, err
	}
	return true, nil
}
