package dnsfix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnsprovider"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// MaxConnectionsPerAccount bounds an account's DNS connections: one
// connection serves every zone its credentials reach.
const MaxConnectionsPerAccount = 10

// MaxConnectionsListed bounds a listing above MaxConnectionsPerAccount:
// accounts keep the connections made under the earlier cap of 50, which
// parallel creates could pass.
const MaxConnectionsListed = 100

// Env is what talking to DNS providers needs.
type Env struct {
	// Keyring seals connection credentials at rest.
	Keyring *secretbox.Keyring
	// Guard refuses private destinations for every provider (the RFC 2136
	// server is dialled through it too).
	Guard *netguard.Guard
	// CloudflareURL and Route53Endpoint replace the providers' public
	// endpoints (tests).
	CloudflareURL   string
	Route53Endpoint string
	// Timeout bounds one provider operation (default 20 s).
	Timeout time.Duration
}

func (e *Env) timeout() time.Duration {
	if e.Timeout > 0 {
		return e.Timeout
	}
	return 20 * time.Second
}

func (e *Env) httpClient() *http.Client { return dnsprovider.NewHTTPClient(e.guard()) }

func (e *Env) guard() *netguard.Guard {
	if e.Guard == nil {
		return netguard.NewGuard(nil)
	}
	return e.Guard
}

// Errors of this package that api/ maps to statuses.
var (
	ErrNotFound     = errors.New("not found")
	ErrLabelTaken   = errors.New("a DNS connection with this label already exists")
	ErrTooMany      = fmt.Errorf("an account may have at most %d DNS connections; delete one first", MaxConnectionsPerAccount)
	ErrNoConnection = errors.New("no DNS connection is linked to the domain")
	ErrManual       = errors.New("this recommendation is instructions only")
	ErrState        = errors.New("the recommendation is not in a state that allows this")
)

// FieldError is an invalid request field; Field is spelled as in JSON.
type FieldError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// VerifyError is a provider's refusal of a connection's credentials or
// zone, with what failed ("TSIG key", "API token", ...).
type VerifyError struct {
	What    string
	Message string
}

// Error implements error.
func (e *VerifyError) Error() string { return e.What + ": " + e.Message }

// ConflictError is a recommendation whose record changed since it was
// observed; Current is the record now (when known).
type ConflictError struct {
	Current []string
}

// Error implements error.
func (e *ConflictError) Error() string {
	if e.Current == nil {
		return "the record changed since it was observed"
	}
	return fmt.Sprintf("the record changed since it was observed; it now holds %q", e.Current)
}

// parseConfig checks a kind's configuration and returns its public part
// and the whole configuration (secrets included) to seal.
func parseConfig(kind string, raw json.RawMessage) (public map[string]any, sealed []byte, err error) {
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(v); err != nil {
			return &FieldError{Field: "config", Message: "does not match the " + kind + " configuration: " + strings.TrimPrefix(err.Error(), "json: ")}
		}
		return nil
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, &FieldError{Field: "config", Message: "is required"}
	}
	switch kind {
	case dnsprovider.KindRFC2136:
		var c dnsprovider.RFC2136Config
		if err := dec(&c); err != nil {
			return nil, nil, err
		}
		if c.TSIGAlgorithm == "" {
			c.TSIGAlgorithm = "hmac-sha256"
		}
		if _, err := dnsprovider.NewRFC2136(c, nil); err != nil {
			return nil, nil, configField(err)
		}
		public = map[string]any{"server": c.Server, "tsig_key_name": c.TSIGKeyName, "tsig_algorithm": c.TSIGAlgorithm}
		sealed, _ = json.Marshal(c)
	case dnsprovider.KindCloudflare:
		var c dnsprovider.CloudflareConfig
		if err := dec(&c); err != nil {
			return nil, nil, err
		}
		if _, err := dnsprovider.NewCloudflare(c, nil, ""); err != nil {
			return nil, nil, configField(err)
		}
		public = map[string]any{"api_token_hint": hint(c.APIToken)}
		sealed, _ = json.Marshal(c)
	case dnsprovider.KindRoute53:
		var c dnsprovider.Route53Config
		if err := dec(&c); err != nil {
			return nil, nil, err
		}
		if _, err := dnsprovider.NewRoute53(c, nil, ""); err != nil {
			return nil, nil, configField(err)
		}
		public = map[string]any{"access_key_id": c.AccessKeyID}
		if c.HostedZoneID != "" {
			public["hosted_zone_id"] = c.HostedZoneID
		}
		sealed, _ = json.Marshal(c)
	default:
		return nil, nil, &FieldError{Field: "kind", Message: "must be one of " + strings.Join(dnsprovider.Kinds(), ", ")}
	}
	return public, sealed, nil
}

func configField(err error) error {
	var fe *dnsprovider.FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: "config." + fe.Field, Message: fe.Message}
	}
	return err
}

// hint shows the last four characters of a token so two connections can
// be told apart.
func hint(tok string) string {
	if len(tok) <= 8 {
		return "…"
	}
	return "…" + tok[len(tok)-4:]
}

// build returns the provider of a kind and its sealed configuration.
func (e *Env) build(kind string, sealed []byte) (dnsprovider.Provider, error) {
	switch kind {
	case dnsprovider.KindRFC2136:
		var c dnsprovider.RFC2136Config
		if err := json.Unmarshal(sealed, &c); err != nil {
			return nil, err
		}
		return dnsprovider.NewRFC2136(c, e.guard().Dialer(&net.Dialer{Timeout: 10 * time.Second}))
	case dnsprovider.KindCloudflare:
		var c dnsprovider.CloudflareConfig
		if err := json.Unmarshal(sealed, &c); err != nil {
			return nil, err
		}
		return dnsprovider.NewCloudflare(c, e.httpClient(), e.CloudflareURL)
	case dnsprovider.KindRoute53:
		var c dnsprovider.Route53Config
		if err := json.Unmarshal(sealed, &c); err != nil {
			return nil, err
		}
		return dnsprovider.NewRoute53(c, e.httpClient(), e.Route53Endpoint)
	}
	return nil, fmt.Errorf("unknown connection kind %q", kind)
}

// open decrypts a connection's configuration and builds its provider.
func (e *Env) open(id uuid.UUID, kind string, ct []byte, keyID string) (dnsprovider.Provider, error) {
	sealed, err := e.Keyring.Open(keyID, ct, id[:])
	if err != nil {
		return nil, fmt.Errorf("error decrypting DNS connection %s: %w", id, err)
	}
	return e.build(kind, sealed)
}

// verify runs the provider's credential check within the env's timeout,
// turning a provider refusal into a *VerifyError.
func (e *Env) verify(ctx context.Context, p dnsprovider.Provider) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	return providerErr(p.Verify(ctx))
}

func providerErr(err error) error {
	var pe *dnsprovider.ProviderError
	if errors.As(err, &pe) {
		return &VerifyError{What: pe.What, Message: pe.Message}
	}
	// One fixed text for every way of not getting an answer: the Go error
	// would tell a refused port from a silent one (and carries the address),
	// which turns the server field into a port scanner.
	if errors.Is(err, netguard.ErrBlocked) {
		return &VerifyError{What: "connection", Message: "the provider's address is not allowed (private or reserved addresses are refused)"}
	}
	if errors.Is(err, dnsprovider.ErrBadAnswer) {
		return &VerifyError{What: "connection", Message: "the provider answered with something that is not its API's response (a proxy's error page?); try again later"}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || isDialError(err) {
		return &VerifyError{What: "connection", Message: "no answer from the provider: check the server address and that it accepts connections from mailwatch"}
	}
	return err
}

// ConnectionInput is a connection's kind, label and configuration as the
// API receives them.
type ConnectionInput struct {
	Kind   string
	Label  string
	Config json.RawMessage
}

// CreateConnection checks the configuration, verifies the credentials
// with the provider by a read (a *VerifyError naming what failed when it
// refuses them), then stores the connection with its configuration sealed.
func CreateConnection(ctx context.Context, db dbutil.Executor, env *Env, accountID uuid.UUID, in ConnectionInput, now time.Time) (dbsqlc.DnsConnection, error) {
	label := strings.TrimSpace(in.Label)
	if label == "" || utf8.RuneCountInString(label) > 100 {
		return dbsqlc.DnsConnection{}, &FieldError{Field: "label", Message: "must be 1 to 100 characters"}
	}
	public, sealed, err := parseConfig(in.Kind, in.Config)
	if err != nil {
		return dbsqlc.DnsConnection{}, err
	}
	p, err := env.build(in.Kind, sealed)
	if err != nil {
		return dbsqlc.DnsConnection{}, configField(err)
	}
	// A full account is told so before its credentials cost a call to the
	// provider; the count that decides is the locked one below.
	if n, err := dbsqlc.New().DNSConnectionCountByAccount(ctx, db, accountID); err != nil {
		return dbsqlc.DnsConnection{}, err
	} else if n >= MaxConnectionsPerAccount {
		return dbsqlc.DnsConnection{}, ErrTooMany
	}
	if err := env.verify(ctx, p); err != nil {
		return dbsqlc.DnsConnection{}, err
	}
	id := uuid.Must(uuid.NewV7())
	ct, keyID, err := env.Keyring.Seal(sealed, id[:])
	if err != nil {
		return dbsqlc.DnsConnection{}, err
	}
	pub, _ := json.Marshal(public)
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (dbsqlc.DnsConnection, error) {
		q := dbsqlc.New()
		// The account row's lock (the one plan limits take) makes
		// concurrent creates count one after the other.
		if _, err := q.AccountPlanLock(ctx, tx, accountID); err != nil {
			return dbsqlc.DnsConnection{}, fmt.Errorf("error locking the account: %w", err)
		}
		n, err := q.DNSConnectionCountByAccount(ctx, tx, accountID)
		if err != nil {
			return dbsqlc.DnsConnection{}, err
		}
		if n >= MaxConnectionsPerAccount {
			return dbsqlc.DnsConnection{}, ErrTooMany
		}
		row, err := q.DNSConnectionInsert(ctx, tx, dbsqlc.DNSConnectionInsertParams{
			ID: id, AccountID: accountID, Kind: in.Kind, Label: label, Config: pub, SecretCiphertext: ct, SecretKeyID: keyID, VerifiedAt: now.UTC(),
		})
		if dbutil.IsUniqueViolation(err, "dns_connections_account_label_key") {
			return row, ErrLabelTaken
		}
		return row, err
	})
}

// UpdateConnection changes a connection's label and, when config is
// given, its configuration (verified again, like at creation). The kind
// never changes.
func UpdateConnection(ctx context.Context, db dbutil.Executor, env *Env, accountID, id uuid.UUID, label *string, config json.RawMessage, now time.Time) (dbsqlc.DnsConnection, error) {
	q := dbsqlc.New()
	row, err := q.DNSConnectionGetByID(ctx, db, dbsqlc.DNSConnectionGetByIDParams{ID: id, AccountID: accountID})
	if dbutil.IsNotFound(err) {
		return row, ErrNotFound
	}
	if err != nil {
		return row, err
	}
	params := dbsqlc.DNSConnectionUpdateParams{ID: id, AccountID: accountID, Label: row.Label, Config: row.Config, SecretCiphertext: row.SecretCiphertext, SecretKeyID: row.SecretKeyID, VerifiedAt: row.VerifiedAt}
	if label != nil {
		l := strings.TrimSpace(*label)
		if l == "" || utf8.RuneCountInString(l) > 100 {
			return row, &FieldError{Field: "label", Message: "must be 1 to 100 characters"}
		}
		params.Label = l
	}
	if len(config) > 0 && string(config) != "null" {
		public, sealed, err := parseConfig(row.Kind, config)
		if err != nil {
			return row, err
		}
		p, err := env.build(row.Kind, sealed)
		if err != nil {
			return row, configField(err)
		}
		if err := env.verify(ctx, p); err != nil {
			return row, err
		}
		ct, keyID, err := env.Keyring.Seal(sealed, id[:])
		if err != nil {
			return row, err
		}
		params.Config, _ = json.Marshal(public)
		params.SecretCiphertext, params.SecretKeyID, params.VerifiedAt = ct, keyID, now.UTC()
	}
	out, err := q.DNSConnectionUpdate(ctx, db, params)
	if dbutil.IsNotFound(err) {
		return out, ErrNotFound
	}
	if dbutil.IsUniqueViolation(err, "dns_connections_account_label_key") {
		return out, ErrLabelTaken
	}
	return out, err
}

// Link finds the zone holding the domain at the connection and binds the
// domain to it (replacing an earlier link). The provider is asked outside
// any transaction.
func Link(ctx context.Context, db dbutil.Executor, env *Env, accountID, connID uuid.UUID, rawDomain string) (dbsqlc.DnsConnectionLink, string, error) {
	q := dbsqlc.New()
	name, err := domainname.Normalize(rawDomain)
	if err != nil {
		return dbsqlc.DnsConnectionLink{}, "", &FieldError{Field: "domain", Message: err.Error()}
	}
	conn, err := q.DNSConnectionGetByID(ctx, db, dbsqlc.DNSConnectionGetByIDParams{ID: connID, AccountID: accountID})
	if dbutil.IsNotFound(err) {
		return dbsqlc.DnsConnectionLink{}, "", ErrNotFound
	}
	if err != nil {
		return dbsqlc.DnsConnectionLink{}, "", err
	}
	dom, err := q.DomainGetByName(ctx, db, dbsqlc.DomainGetByNameParams{AccountID: accountID, Name: name})
	if dbutil.IsNotFound(err) {
		return dbsqlc.DnsConnectionLink{}, "", &FieldError{Field: "domain", Message: name + " is not one of the account's domains"}
	}
	if err != nil {
		return dbsqlc.DnsConnectionLink{}, "", err
	}
	p, err := env.open(conn.ID, conn.Kind, conn.SecretCiphertext, conn.SecretKeyID)
	if err != nil {
		return dbsqlc.DnsConnectionLink{}, "", err
	}
	fctx, cancel := context.WithTimeout(ctx, env.timeout())
	zone, err := p.FindZone(fctx, name)
	cancel()
	if errors.Is(err, dnsprovider.ErrZoneNotFound) {
		return dbsqlc.DnsConnectionLink{}, "", &VerifyError{What: "zone", Message: fmt.Sprintf("no zone of this connection holds %s", name)}
	}
	if err != nil {
		return dbsqlc.DnsConnectionLink{}, "", providerErr(err)
	}
	link, err := q.DNSConnectionLinkUpsert(ctx, db, dbsqlc.DNSConnectionLinkUpsertParams{DomainID: dom.ID, ConnectionID: conn.ID, ZoneName: zone.Name, ZoneID: zone.ID})
	return link, name, err
}

// Unlink removes a domain's link to the connection.
func Unlink(ctx context.Context, db dbutil.Executor, accountID, connID uuid.UUID, rawDomain string) error {
	q := dbsqlc.New()
	name, err := domainname.Normalize(rawDomain)
	if err != nil {
		return &FieldError{Field: "domain", Message: err.Error()}
	}
	if _, err := q.DNSConnectionGetByID(ctx, db, dbsqlc.DNSConnectionGetByIDParams{ID: connID, AccountID: accountID}); dbutil.IsNotFound(err) {
		return ErrNotFound
	} else if err != nil {
		return err
	}
	dom, err := q.DomainGetByName(ctx, db, dbsqlc.DomainGetByNameParams{AccountID: accountID, Name: name})
	if dbutil.IsNotFound(err) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	n, err := q.DNSConnectionLinkDelete(ctx, db, dbsqlc.DNSConnectionLinkDeleteParams{DomainID: dom.ID, ConnectionID: connID})
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// isDialError reports a failure to reach the provider that is not a
// net.Error (an EOF or reset mid-exchange).
func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}
