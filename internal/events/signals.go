package events

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// Signal is an event about a domain, in words, for a timeline.
type Signal struct {
	ID             uuid.UUID
	Type           string
	At             time.Time
	Title, Summary string
}

// DMARCTimelineTypes are the events marked on a domain's DMARC chart: what
// changed in who sends as the domain.
var DMARCTimelineTypes = []string{TypeDMARCNewSource, TypeDMARCNewSubdomain, TypeDMARCReportsStopped, TypeDMARCReportsResumed,
	TypeDKIMSelectorNew, TypeDKIMSelectorIdle, TypeDKIMKeyWeak}

// MaxSignals bounds the events one Signals read returns.
const MaxSignals = 200

// Signals returns the account's events of types about domain in [since,
// until), newest first, at most max (MaxSignals at most).
func Signals(ctx context.Context, db dbsqlc.DBTX, account uuid.UUID, domain string, types []string, since, until time.Time, max int) ([]Signal, error) {
	rows, err := dbsqlc.New().EventCauseCandidates(ctx, db, dbsqlc.EventCauseCandidatesParams{
		AccountID: account, Domain: domain, Types: types, Since: since, Until: until, MaxRows: int32(min(max, MaxSignals)),
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the domain's events: %w", err)
	}
	out := make([]Signal, len(rows))
	for i, r := range rows {
		out[i] = Signal{ID: r.ID, Type: r.EventType, At: r.CreatedAt.UTC(), Title: Title(r.EventType), Summary: Summary(r.EventType, r.Payload)}
	}
	return out, nil
}
