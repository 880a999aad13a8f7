package reports

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reportmail"
)

// MaxRawBytes caps a stored raw report (as mox: 15 MB for a whole message).
const MaxRawBytes = reportmail.MaxMessageBytes

// Sources of a raw report.
const (
	SourceSMTP   = "smtp"
	SourceUpload = "upload"
	SourceHTTPS  = "https"
)

var (
	// ErrTooLarge is returned by Receive for a report over MaxRawBytes.
	ErrTooLarge = errors.New("report too large")
	// ErrEmpty is returned by Receive for a report without bytes.
	ErrEmpty = errors.New("empty report")
)

// Service holds what the capability needs from the world.
type Service struct {
	// DB is the pool; workers and the SMTP listener open their own
	// transactions on it.
	DB dbutil.Executor
	// River inserts parse jobs; nil takes the client from the context
	// (inside a worker).
	River  *river.Client[pgx.Tx]
	Signer *Signer
	// Emitter writes events in the parse transaction.
	Emitter *events.Emitter
	// Resolver answers PTR queries for source IPs; nil skips reverse DNS.
	Resolver dnscheck.Resolver
	Logger   *slog.Logger
	Now      func() time.Time
	// AfterAggregate, when set, runs in the transaction that stored an
	// aggregate report (the workers queue the domain's health recompute:
	// its score is capped by the DMARC pass rate).
	AfterAggregate func(ctx context.Context, tx pgx.Tx, domainID uuid.UUID) error
}

var q = dbsqlc.New()

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// ParseArgs asks for one received report to be parsed. The worker lives in
// package jobs; the args live here so intake can queue them in its own
// transaction.
type ParseArgs struct {
	MessageID uuid.UUID `json:"message_id"`
}

// Kind implements river.JobArgs.
func (ParseArgs) Kind() string { return "report_parse" }

// Address is one signed reporting address of a domain.
type Address struct {
	Kind      Kind   `json:"kind" validate:"required" enum:"dmarc,tlsrpt"`
	Address   string `json:"address" validate:"required"`
	KeyID     string `json:"key_id" validate:"required" description:"Id of the MAILWATCH_SECRET_KEY that signed it."`
	Current   bool   `json:"current" validate:"required" description:"Signed with the current key; false for an address of a previous key, still accepted while that key is in MAILWATCH_SECRET_KEY_PREVIOUS."`
	LocalPart string `json:"-"`
	// Signed is true once POST .../reporting-address/sign was called for
	// the address: the account chose to receive reports here, so the
	// domain's DNS is asked to name it. Every listed address routes,
	// signed or not.
	Signed bool `json:"-"`
}

// Mint makes the domain's DMARC and TLS-RPT addresses under the current
// key routable: the SMTP listener and the HTTPS ingress find a domain by
// its minted local parts. It is idempotent and writes nothing for
// addresses already minted; it marks nothing signed. Domain registration
// mints in its own transaction, so the addresses GET .../reporting-address
// shows route from the start. Without a keyring there is nothing to mint.
func (s *Service) Mint(ctx context.Context, db dbsqlc.DBTX, accountID, domainID uuid.UUID, domain string) error {
	return s.mint(ctx, db, accountID, domainID, domain, false)
}

func (s *Service) mint(ctx context.Context, db dbsqlc.DBTX, accountID, domainID uuid.UUID, domain string, sign bool) error {
	if s.Signer == nil || s.Signer.Keyring == nil {
		return nil
	}
	keyID := s.Signer.Keyring.PrimaryKeyID()
	for _, kind := range []Kind{KindDMARC, KindTLSRPT} {
		err := q.ReportingAddressInsert(ctx, db, dbsqlc.ReportingAddressInsertParams{
			LocalPart: s.Signer.Current(kind, accountID, domain), DomainID: domainID, AccountID: accountID,
			Kind: string(kind), KeyID: keyID, Sign: sign,
		})
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ForeignKeyViolation {
			return ErrDomainGone // deleted since the caller read it
		}
		if err != nil {
			return fmt.Errorf("error storing reporting address: %w", err)
		}
	}
	return nil
}

// ErrDomainGone is a mint for a domain deleted meanwhile.
var ErrDomainGone = errors.New("the domain no longer exists")

// MintMissing mints the current key's addresses of every domain lacking
// them, batch domains at a time in id order, and returns how many domains
// it minted for. Domains registered before registration minted, and every
// domain after a key rotation, get addresses that route without anyone
// reading them first: an address shown once keeps routing. Each mint is
// idempotent, so runs may overlap.
func (s *Service) MintMissing(ctx context.Context, db dbsqlc.DBTX, batch int) (int, error) {
	if s.Signer == nil || s.Signer.Keyring == nil {
		return 0, nil
	}
	keyID := s.Signer.Keyring.PrimaryKeyID()
	minted := 0
	after := uuid.Nil
	for {
		rows, err := q.DomainsWithoutReportingAddresses(ctx, db, dbsqlc.DomainsWithoutReportingAddressesParams{
			After: after, KeyID: keyID, MaxRows: int32(batch),
		})
		if err != nil {
			return minted, fmt.Errorf("error listing domains without reporting addresses: %w", err)
		}
		for _, d := range rows {
			switch err := s.Mint(ctx, db, d.AccountID, d.ID, d.Name); {
			case errors.Is(err, ErrDomainGone):
			case err != nil:
				return minted, err
			default:
				minted++
			}
			after = d.ID
		}
		if len(rows) < batch {
			return minted, nil
		}
	}
}

// Sign mints the domain's DMARC and TLS-RPT addresses under the current
// key and marks them signed (idempotent: the same inputs give the same
// addresses), and returns every address of the domain whose key is still
// in the ring, current first.
func (s *Service) Sign(ctx context.Context, tx pgx.Tx, accountID, domainID uuid.UUID, domain string) ([]Address, error) {
	if err := s.mint(ctx, tx, accountID, domainID, domain, true); err != nil {
		return nil, err
	}
	return s.Addresses(ctx, tx, domainID)
}

// Shown returns the domain's addresses for display, current key first,
// minting the current key's first when they are missing: a domain
// registered before registration minted, or one read after a key
// rotation. Whatever it returns routes, and it writes only when it mints.
func (s *Service) Shown(ctx context.Context, db dbsqlc.DBTX, accountID, domainID uuid.UUID, domain string) ([]Address, error) {
	addrs, err := s.Addresses(ctx, db, domainID)
	if err != nil {
		return nil, err
	}
	current := map[Kind]bool{}
	for _, a := range addrs {
		if a.Current {
			current[a.Kind] = true
		}
	}
	if current[KindDMARC] && current[KindTLSRPT] {
		return addrs, nil
	}
	if err := s.Mint(ctx, db, accountID, domainID, domain); err != nil {
		return nil, err
	}
	return s.Addresses(ctx, db, domainID)
}

// Addresses lists the domain's minted addresses whose key is still in the
// ring, current key first.
func (s *Service) Addresses(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID) ([]Address, error) {
	rows, err := q.ReportingAddressListByDomain(ctx, db, domainID)
	if err != nil {
		return nil, fmt.Errorf("error listing reporting addresses: %w", err)
	}
	primary := s.Signer.Keyring.PrimaryKeyID()
	var current, previous []Address
	for _, r := range rows {
		if !s.Signer.Keyring.Has(r.KeyID) {
			continue
		}
		a := Address{Kind: Kind(r.Kind), Address: s.Signer.Address(r.LocalPart), KeyID: r.KeyID, Current: r.KeyID == primary,
			LocalPart: r.LocalPart, Signed: r.SignedAt != nil}
		if a.Current {
			current = append(current, a)
		} else {
			previous = append(previous, a)
		}
	}
	return append(current, previous...), nil
}

// SignedAddresses returns the domain's DMARC and TLS-RPT addresses its DNS
// is asked to name: the first signed one of each kind, current key first;
// "" for a kind with none (the account never called the sign route).
func (s *Service) SignedAddresses(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID) (dmarc, tlsrpt string, err error) {
	addrs, err := s.Addresses(ctx, db, domainID)
	if err != nil {
		return "", "", err
	}
	for _, a := range addrs {
		switch {
		case !a.Signed:
		case a.Kind == KindDMARC && dmarc == "":
			dmarc = a.Address
		case a.Kind == KindTLSRPT && tlsrpt == "":
			tlsrpt = a.Address
		}
	}
	return dmarc, tlsrpt, nil
}

// Target is the domain a verified reporting address belongs to.
type Target struct {
	AccountID uuid.UUID
	DomainID  uuid.UUID
	Domain    string
	Kind      Kind
}

// Resolve verifies a reporting address's local part and returns its
// domain. It fails with ErrBadAddress for a malformed, unknown or forged
// local part (its MAC does not match its domain), without any parsing.
func (s *Service) Resolve(ctx context.Context, db dbsqlc.DBTX, localPart string) (Target, error) {
	p, err := s.Signer.ParseLocalPart(localPart)
	if err != nil {
		return Target{}, err
	}
	row, err := q.ReportingAddressGet(ctx, db, p.LocalPart)
	if dbutil.IsNotFound(err) {
		return Target{}, ErrBadAddress
	}
	if err != nil {
		return Target{}, fmt.Errorf("error reading reporting address: %w", err)
	}
	if err := s.Signer.Verify(p, row.AccountID, row.DomainName); err != nil {
		return Target{}, err
	}
	return Target{AccountID: row.AccountID, DomainID: row.DomainID, Domain: row.DomainName, Kind: p.Kind}, nil
}

// ResolveToken is Resolve for the HTTPS ingress: token is the part after
// "tlsrpt+" of the domain's TLS-RPT address.
func (s *Service) ResolveToken(ctx context.Context, db dbsqlc.DBTX, token string) (Target, error) {
	if strings.Contains(token, "+") {
		return Target{}, ErrBadAddress
	}
	t, err := s.Resolve(ctx, db, string(KindTLSRPT)+"+"+token)
	if err != nil {
		return Target{}, err
	}
	return t, nil
}

// Incoming is a raw report to store.
type Incoming struct {
	AccountID uuid.UUID
	DomainID  uuid.UUID
	Kind      Kind
	Source    string
	Raw       []byte
}

// Received acknowledges a stored report.
type Received struct {
	MessageID  uuid.UUID
	ReceivedAt time.Time
	JobID      int64
}

// Receive stores a raw report and queues its parse job in tx: the report
// exists if and only if its parse is queued.
func (s *Service) Receive(ctx context.Context, tx pgx.Tx, in Incoming) (Received, error) {
	if len(in.Raw) == 0 {
		return Received{}, ErrEmpty
	}
	if len(in.Raw) > MaxRawBytes {
		return Received{}, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(in.Raw), MaxRawBytes)
	}
	row, err := q.ReportMessageInsert(ctx, tx, dbsqlc.ReportMessageInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: in.AccountID, DomainID: in.DomainID,
		Kind: string(in.Kind), Source: in.Source, Raw: in.Raw, RawSize: int32(len(in.Raw)),
	})
	if err != nil {
		return Received{}, fmt.Errorf("error storing report: %w", err)
	}
	client := s.River
	if client == nil {
		if client, err = river.ClientFromContextSafely[pgx.Tx](ctx); err != nil {
			return Received{}, fmt.Errorf("reports: no River client: %w", err)
		}
	}
	res, err := client.InsertTx(ctx, tx, ParseArgs{MessageID: row.ID}, nil)
	if err != nil {
		return Received{}, fmt.Errorf("error queueing report parse: %w", err)
	}
	return Received{MessageID: row.ID, ReceivedAt: row.ReceivedAt, JobID: res.Job.ID}, nil
}
