package domains

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/health"
	"github.com/mailwatch/mailwatch/internal/plans"
)

// Page sizes when the caller gives none.
const (
	DefaultPageSize      = 100
	DefaultHistoryLength = 50
)

var (
	// ErrNotFound: the account monitors no such domain.
	ErrNotFound = errors.New("domain not found")
	// ErrExists: the account already monitors the domain (*ExistsError
	// names it).
	ErrExists = errors.New("domain already monitored")
)

// ExistsError is a create of a domain the account already monitors; it
// matches ErrExists.
type ExistsError struct{ Name string }

func (e *ExistsError) Error() string { return "the account already monitors " + e.Name }

// Is makes errors.Is(err, ErrExists) true.
func (e *ExistsError) Is(target error) bool { return target == ErrExists }

// Queue is what these rules need of River (*river.Client[pgx.Tx] is one):
// a job inserted in the caller's transaction.
type Queue interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Minter mints a new domain's reporting addresses in the caller's
// transaction (*reports.Service is one).
type Minter interface {
	Mint(ctx context.Context, db dbsqlc.DBTX, accountID, domainID uuid.UUID, domain string) error
}

// New is a domain to monitor.
type New struct {
	Name string // any spelling; stored normalised
	Tags []string
}

// Create starts monitoring n for the account. In one transaction it checks
// the plan's domains limit (*billing.LimitError; def is the default plan),
// inserts the domain (*ExistsError when the account has it), queues its
// first check and mints its reporting addresses. A refused name or tag is
// a *FieldError.
func Create(ctx context.Context, db dbutil.Executor, q Queue, mint Minter, accountID uuid.UUID, n New, def string, now time.Time) (dbsqlc.Domain, error) {
	name, err := domainname.Normalize(n.Name)
	if err != nil {
		return dbsqlc.Domain{}, &FieldError{Field: "domain", Message: err.Error()}
	}
	tags, err := CleanTags("tags", n.Tags)
	if err != nil {
		return dbsqlc.Domain{}, err
	}
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (dbsqlc.Domain, error) {
		if err := billing.CheckLimit(ctx, tx, accountID, plans.LimitDomains, def, now); err != nil {
			return dbsqlc.Domain{}, err
		}
		row, err := dbsqlc.New().DomainInsert(ctx, tx, dbsqlc.DomainInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: accountID, Name: name, Tags: tags,
		})
		if dbutil.IsUniqueViolation(err, "domains_account_name_key") {
			return row, &ExistsError{Name: name}
		}
		if err != nil {
			return row, fmt.Errorf("inserting domain: %w", err)
		}
		if _, err := q.InsertTx(ctx, tx, CheckArgs{DomainID: row.ID}, nil); err != nil {
			return row, fmt.Errorf("error queueing the first check: %w", err)
		}
		// Its reporting addresses route from now on: a rua published from
		// GET .../reporting-address is never refused.
		if err := mint.Mint(ctx, tx, row.AccountID, row.ID, row.Name); err != nil {
			return row, fmt.Errorf("minting reporting addresses: %w", err)
		}
		return row, nil
	})
}

// Get reads the account's domain of that name (any spelling); ErrNotFound
// when the account monitors none.
func Get(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID, name string) (dbsqlc.Domain, error) {
	name, err := NormalizeName(name)
	if err != nil {
		return dbsqlc.Domain{}, err
	}
	row, err := dbsqlc.New().DomainGetByName(ctx, db, dbsqlc.DomainGetByNameParams{AccountID: accountID, Name: name})
	if dbutil.IsNotFound(err) {
		return row, ErrNotFound
	}
	if err != nil {
		return row, fmt.Errorf("reading domain: %w", err)
	}
	return row, nil
}

// List pages through the account's domains by name: limit of those whose
// name sorts after after.
func List(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID, after string, limit int) ([]dbsqlc.DomainListRow, error) {
	rows, err := dbsqlc.New().DomainList(ctx, db, dbsqlc.DomainListParams{AccountID: accountID, After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing domains: %w", err)
	}
	return rows, nil
}

// Change is a partial update of a domain: nil fields stay as they are.
type Change struct {
	Tags          *[]string
	DKIMSelectors *[]string
}

// Update applies c to the account's domain of that name (ErrNotFound;
// *FieldError for a refused tag or selector). Changing the DKIM selectors
// forgets the known DKIM result, since other selectors find other keys
// (a new baseline, not a DNS change), and queues a check, both in the
// update's transaction.
func Update(ctx context.Context, db dbutil.Executor, q Queue, accountID uuid.UUID, name string, c Change) (dbsqlc.Domain, error) {
	name, err := NormalizeName(name)
	if err != nil {
		return dbsqlc.Domain{}, err
	}
	params := dbsqlc.DomainUpdateParams{AccountID: accountID, Name: name}
	if c.Tags != nil {
		if params.Tags, err = CleanTags("tags", *c.Tags); err != nil {
			return dbsqlc.Domain{}, err
		}
	}
	if c.DKIMSelectors != nil {
		if params.DkimSelectors, err = CleanSelectors("dkim_selectors", *c.DKIMSelectors); err != nil {
			return dbsqlc.Domain{}, err
		}
	}
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (dbsqlc.Domain, error) {
		qs := dbsqlc.New()
		before, err := qs.DomainGetByNameForUpdate(ctx, tx, dbsqlc.DomainGetByNameForUpdateParams{AccountID: accountID, Name: name})
		if dbutil.IsNotFound(err) {
			return before, ErrNotFound
		}
		if err != nil {
			return before, fmt.Errorf("locking domain: %w", err)
		}
		row, err := qs.DomainUpdate(ctx, tx, params)
		if err != nil {
			return row, fmt.Errorf("updating domain: %w", err)
		}
		if params.DkimSelectors != nil && !slices.Equal(before.DkimSelectors, row.DkimSelectors) {
			if err := qs.DomainForgetKnownCheck(ctx, tx, dbsqlc.DomainForgetKnownCheckParams{ID: row.ID, CheckName: dnscheck.NameDKIM}); err != nil {
				return row, fmt.Errorf("forgetting the DKIM result: %w", err)
			}
			if _, err := q.InsertTx(ctx, tx, CheckArgs{DomainID: row.ID}, nil); err != nil {
				return row, fmt.Errorf("error queueing a check: %w", err)
			}
		}
		return row, nil
	})
}

// Delete stops monitoring the account's domain of that name, with its
// results and health history; ErrNotFound when there is none.
func Delete(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID, name string) error {
	name, err := NormalizeName(name)
	if err != nil {
		return err
	}
	n, err := dbsqlc.New().DomainDelete(ctx, db, dbsqlc.DomainDeleteParams{AccountID: accountID, Name: name})
	if err != nil {
		return fmt.Errorf("deleting domain: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// QueueRecompute queues a recomputation of the domain's health score from
// its stored results, in its own transaction on db, and returns the job id.
func QueueRecompute(ctx context.Context, db dbutil.Executor, q Queue, domainID uuid.UUID) (int64, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		res, err := q.InsertTx(ctx, tx, HealthArgs{DomainID: domainID}, nil)
		if err != nil {
			return 0, fmt.Errorf("error queueing health recompute: %w", err)
		}
		return res.Job.ID, nil
	})
}

// HistoryEntry is one stored health computation.
type HistoryEntry struct {
	Score      int
	Report     health.Report
	ComputedAt time.Time
}

// History returns the domain's newest limit health computations, newest
// first.
func History(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, limit int) ([]HistoryEntry, error) {
	rows, err := dbsqlc.New().DomainHealthList(ctx, db, dbsqlc.DomainHealthListParams{DomainID: domainID, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing health history: %w", err)
	}
	out := make([]HistoryEntry, len(rows))
	for i, r := range rows {
		if err := json.Unmarshal(r.Report, &out[i].Report); err != nil {
			return nil, fmt.Errorf("error decoding health history: %w", err)
		}
		out[i].Score, out[i].ComputedAt = int(r.Score), r.ComputedAt
	}
	return out, nil
}

// Ranked is a domain's place in the account's health ranking.
type Ranked struct {
	Name      string
	Score     *int
	CheckedAt *time.Time
}

// Lowest lists up to n of the account's domains by health: the lowest
// score first, domains never scored after the scored ones, then by name.
func Lowest(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID, n int) ([]Ranked, error) {
	rows, err := dbsqlc.New().DomainLowestScored(ctx, db, dbsqlc.DomainLowestScoredParams{AccountID: accountID, MaxRows: int32(n)})
	if err != nil {
		return nil, fmt.Errorf("ranking domains: %w", err)
	}
	out := make([]Ranked, len(rows))
	for i, r := range rows {
		out[i].Name = r.Name
		if r.Score != nil {
			score := int(*r.Score)
			out[i].Score = &score
		}
		if r.CheckedAt != nil {
			at := r.CheckedAt.UTC()
			out[i].CheckedAt = &at
		}
	}
	return out, nil
}

// Summary counts the account's domains for the dashboard: all, those at
// risk (score below AtRiskBelow) and the scored ones with their average.
func Summary(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID) (dbsqlc.DomainDashboardRow, error) {
	row, err := dbsqlc.New().DomainDashboard(ctx, db, dbsqlc.DomainDashboardParams{AccountID: accountID, AtRiskBelow: AtRiskBelow})
	if err != nil {
		return row, fmt.Errorf("counting domains: %w", err)
	}
	return row, nil
}
