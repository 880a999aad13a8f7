package dnsfix

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
)

// MX setup states.
const (
	MXPending  = "pending"
	MXVerified = "verified"
	MXFailed   = "failed"
	MXLost     = "lost"
)

// MXFailAfter is how long a setup may stay pending before it fails.
const MXFailAfter = 72 * time.Hour

// MXPreference is the preference of the MX record mailwatch asks for.
const MXPreference = 10

// MXConfig is the MX setup's configuration.
type MXConfig struct {
	// Host is mailwatch's inbound MX host, what customers' MX records
	// point to.
	Host string
}

// MXRecord is a record to publish for an MX setup.
type MXRecord struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// TokenName is the owner name of a setup's ownership TXT record.
func TokenName(name string) string { return "_mailwatch." + name }

// TokenValue is the ownership TXT record's text.
func TokenValue(token string) string { return "mailwatch-verification=" + token }

// MXRecords are the records a setup asks the customer to publish.
func MXRecords(cfg MXConfig, s dbsqlc.MxSetup) []MXRecord {
	return []MXRecord{
		{Name: s.Name, Type: "MX", Value: fmt.Sprintf("%d %s.", MXPreference, strings.TrimSuffix(cfg.Host, "."))},
		{Name: TokenName(s.Name), Type: "TXT", Value: TokenValue(s.Token)},
	}
}

// SubdomainName turns the subdomain given for a domain ("reports" or
// "reports.example.com") into the full name, which must lie strictly
// below the domain.
func SubdomainName(domain, sub string) (string, error) {
	s := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(sub)), ".")
	if s == "" {
		return "", &FieldError{Field: "subdomain", Message: "is required"}
	}
	if !strings.HasSuffix(s, "."+domain) {
		s += "." + domain
	}
	if s == domain || len(s) > 253 {
		return "", &FieldError{Field: "subdomain", Message: "must be a name below " + domain}
	}
	if _, ok := dns.IsDomainName(s); !ok {
		return "", &FieldError{Field: "subdomain", Message: "is not a valid host name"}
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."+domain), ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", &FieldError{Field: "subdomain", Message: "is not a valid host name"}
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", &FieldError{Field: "subdomain", Message: "may hold only letters, digits and hyphens"}
			}
		}
	}
	return s, nil
}

// SetupMX starts (or repeats) the MX setup of a subdomain of the domain:
// a new subdomain gets a fresh token and starts pending; the same one
// keeps its token and state.
func SetupMX(ctx context.Context, db dbutil.Executor, domain dbsqlc.Domain, sub string) (dbsqlc.MxSetup, error) {
	name, err := SubdomainName(domain.Name, sub)
	if err != nil {
		return dbsqlc.MxSetup{}, err
	}
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	token := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
	return dbsqlc.New().MXSetupUpsert(ctx, db, dbsqlc.MXSetupUpsertParams{ID: uuid.Must(uuid.NewV7()), DomainID: domain.ID, Name: name, Token: token})
}

// ErrNoMXSetup: the domain has no MX setup.
var ErrNoMXSetup = errors.New("MX setup not found")

// GetMXSetup reads the domain's MX setup; ErrNoMXSetup when it has none.
func GetMXSetup(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID) (dbsqlc.MxSetup, error) {
	m, err := dbsqlc.New().MXSetupGetByDomain(ctx, db, domainID)
	if dbutil.IsNotFound(err) {
		return m, ErrNoMXSetup
	}
	if err != nil {
		return m, fmt.Errorf("reading MX setup: %w", err)
	}
	return m, nil
}

// ErrTemporary wraps a DNS failure that leaves a verification undecided.
var ErrTemporary = errors.New("a DNS lookup failed temporarily")

// CheckMX looks the setup's records up and returns what is wrong (nothing
// when verified): the MX must point to cfg.Host, with no foreign MX of
// equal or better preference and no null MX; the name must not be a
// CNAME; the ownership TXT must hold the token. A timeout or SERVFAIL is
// ErrTemporary, never a problem.
func CheckMX(ctx context.Context, r dnscheck.Resolver, cfg MXConfig, s dbsqlc.MxSetup) ([]string, error) {
	host := strings.ToLower(strings.TrimSuffix(cfg.Host, "."))
	var problems []string
	if ans, err := r.Query(ctx, s.Name, dns.TypeCNAME); err == nil && len(ans.Records) > 0 {
		problems = append(problems, fmt.Sprintf("%s is a CNAME; an MX name must hold its own records (RFC 2181 section 10.3)", s.Name))
	} else if err != nil && !dnscheck.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %v", ErrTemporary, err)
	}
	mxs, err := r.LookupMX(ctx, s.Name)
	switch {
	case err != nil && !dnscheck.IsNotFound(err):
		return nil, fmt.Errorf("%w: %v", ErrTemporary, err)
	case err != nil || len(mxs) == 0:
		problems = append(problems, fmt.Sprintf("%s has no MX record; publish \"%d %s.\"", s.Name, MXPreference, host))
	default:
		ours := -1
		for _, mx := range mxs {
			if strings.ToLower(strings.TrimSuffix(mx.Host, ".")) == host {
				if ours < 0 || int(mx.Pref) < ours {
					ours = int(mx.Pref)
				}
			}
		}
		for _, mx := range mxs {
			h := strings.ToLower(strings.TrimSuffix(mx.Host, "."))
			switch {
			case h == "":
				problems = append(problems, fmt.Sprintf("%s has a null MX (RFC 7505): it refuses all mail", s.Name))
			case h != host && ours >= 0 && int(mx.Pref) <= ours:
				problems = append(problems, fmt.Sprintf("%s also has the MX %s with preference %d, equal to or better than mailwatch's %d: mail would go there", s.Name, h, mx.Pref, ours))
			}
		}
		if ours < 0 {
			problems = append(problems, fmt.Sprintf("no MX record of %s points to %s", s.Name, host))
		}
	}
	txts, err := r.LookupTXT(ctx, TokenName(s.Name))
	if err != nil && !dnscheck.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %v", ErrTemporary, err)
	}
	found := false
	for _, t := range txts {
		if strings.TrimSpace(t) == TokenValue(s.Token) {
			found = true
		}
	}
	if !found {
		problems = append(problems, fmt.Sprintf("the TXT record %s does not hold %q", TokenName(s.Name), TokenValue(s.Token)))
	}
	return problems, nil
}

// NextMXState is the state after a verification that found problems
// (none: verified). A verified setup that fails is lost; a pending one
// fails once it is MXFailAfter old; lost and failed stay until they pass.
func NextMXState(state string, problems []string, createdAt, now time.Time) string {
	if len(problems) == 0 {
		return MXVerified
	}
	switch state {
	case MXVerified:
		return MXLost
	case MXPending:
		if now.Sub(createdAt) >= MXFailAfter {
			return MXFailed
		}
	}
	return state
}

// MXLostPayload is the payload of mx_verification_lost.
type MXLostPayload struct {
	Domain   string   `json:"domain"`
	Name     string   `json:"name"`
	Problems []string `json:"problems"`
}

// StoreMXCheck records a verification in tx (problems as CheckMX returned
// them, for the setup as it was read before the lookups) and emits
// mx_verification_lost when a verified setup stops passing. A setup whose
// subdomain or token changed since it was read is left alone.
func StoreMXCheck(ctx context.Context, tx pgx.Tx, em *events.Emitter, checked dbsqlc.MxSetup, problems []string, now time.Time) (dbsqlc.MxSetup, error) {
	q := dbsqlc.New()
	cur, err := q.MXSetupGetByIDForUpdate(ctx, tx, checked.ID)
	if dbutil.IsNotFound(err) {
		return cur, ErrNotFound
	}
	if err != nil {
		return cur, err
	}
	if cur.Name != checked.Name || cur.Token != checked.Token {
		return cur, nil
	}
	next := NextMXState(cur.State, problems, cur.CreatedAt, now)
	if problems == nil {
		problems = []string{}
	}
	row, err := q.MXSetupStore(ctx, tx, dbsqlc.MXSetupStoreParams{ID: cur.ID, State: next, Problems: problems, CheckedAt: now.UTC()})
	if err != nil {
		return row, err
	}
	if cur.State == MXVerified && next == MXLost {
		dom, err := q.DomainGetByID(ctx, tx, cur.DomainID)
		if err != nil {
			return row, err
		}
		if _, err := em.Emit(ctx, tx, events.Event{AccountID: dom.AccountID, Type: events.TypeMXVerificationLost, Domain: dom.Name, Tags: dom.Tags, At: now,
			Payload: MXLostPayload{Domain: dom.Name, Name: cur.Name, Problems: problems}}); err != nil {
			return row, err
		}
	}
	return row, nil
}

// VerifyMX checks a setup now and stores the outcome: the lookups outside
// any transaction, the state in one.
func VerifyMX(ctx context.Context, db dbutil.Executor, r dnscheck.Resolver, em *events.Emitter, cfg MXConfig, s dbsqlc.MxSetup, now func() time.Time) (dbsqlc.MxSetup, error) {
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	problems, err := CheckMX(ctx2, r, cfg, s)
	cancel()
	if err != nil {
		return s, err
	}
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (dbsqlc.MxSetup, error) {
		return StoreMXCheck(ctx, tx, em, s, problems, now())
	})
}

// IsVerifiedInbound reports whether name is a verified custom inbound
// subdomain, whose mail the SMTP listener should accept like
// INBOUND_DOMAIN's (the listener's wiring is the coordinator's: see
// docs/features/dnsfix.md).
func IsVerifiedInbound(ctx context.Context, db dbutil.Executor, name string) (bool, error) {
	return dbsqlc.New().MXSetupIsVerified(ctx, db, strings.ToLower(strings.TrimSuffix(name, ".")))
}
