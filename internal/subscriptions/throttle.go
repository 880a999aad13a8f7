package subscriptions

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// Throughput bounds an account may set per subscription: pushes started
// per second and pushes in flight at once, across every worker process.
const (
	MaxPerSecondLimit = 1000
	MaxInFlightLimit  = 100
	// leaseTTL is how long a push slot stays taken when its worker dies
	// mid-push: the push's own timeout and a margin.
	leaseTTL = webhook.DefaultTimeout + 15*time.Second
)

// Bounded reports whether sub has a throughput bound; pushes of the others
// never touch the tables that keep them.
func Bounded(sub dbsqlc.EventSubscription) bool {
	return sub.MaxPerSecond != nil || sub.MaxInFlight != nil
}

// Busy says why a push must wait for its subscription's bound.
type Busy struct {
	// InFlight is true when every push slot is taken, false when the rate
	// is used up.
	InFlight bool
	// Limit is the bound that is reached.
	Limit int32
	// Wait is when the next push may start: exact for the rate, zero
	// (unknown: a slot frees when a push ends) for pushes in flight.
	Wait time.Duration
}

func (b *Busy) Error() string {
	if b.InFlight {
		return fmt.Sprintf("the subscription allows %d pushes in flight at once (max_in_flight) and all are taken", b.Limit)
	}
	return fmt.Sprintf("the subscription allows %d pushes per second (max_per_second)", b.Limit)
}

// Lease is a push admitted under its subscription's bounds.
type Lease struct {
	sub, delivery uuid.UUID
	slot          *int32
}

// Release frees the push's slot, if it took one. It is safe to call on a
// zero Lease and twice.
func (l *Lease) Release(ctx context.Context, db dbutil.Executor) error {
	if l == nil || l.slot == nil {
		return nil
	}
	slot := *l.slot
	l.slot = nil
	if err := dbsqlc.New().SubscriptionLeaseRelease(ctx, db, dbsqlc.SubscriptionLeaseReleaseParams{
		ID: l.sub, Slot: slot, DeliveryID: l.delivery,
	}); err != nil {
		return fmt.Errorf("freeing a push slot: %w", err)
	}
	return nil
}

// Admit admits one push of delivery under sub's bounds, shared by every
// worker process through Postgres: a slot of max_in_flight (leased until
// Release, or leaseTTL should the worker die), then a share of
// max_per_second (a GCRA cell allowing a burst of one second's pushes).
// Over a bound it returns a *Busy and takes nothing. A subscription
// without bounds is admitted without a statement.
func Admit(ctx context.Context, db dbutil.Executor, sub dbsqlc.EventSubscription, delivery uuid.UUID, now time.Time) (Lease, *Busy, error) {
	l := Lease{sub: sub.ID, delivery: delivery}
	q := dbsqlc.New()
	if sub.MaxInFlight != nil {
		slot, err := q.SubscriptionLeaseTake(ctx, db, dbsqlc.SubscriptionLeaseTakeParams{
			ID: sub.ID, DeliveryID: delivery, ExpiresAt: now.Add(leaseTTL), LastSlot: *sub.MaxInFlight - 1, Now: now,
		})
		if dbutil.IsNotFound(err) {
			return Lease{}, &Busy{InFlight: true, Limit: *sub.MaxInFlight}, nil
		}
		if err != nil {
			return Lease{}, nil, fmt.Errorf("taking a push slot: %w", err)
		}
		l.slot = &slot
	}
	if sub.MaxPerSecond == nil {
		return l, nil, nil
	}
	busy, err := takeRate(ctx, db, sub.ID, *sub.MaxPerSecond, now)
	if err == nil && busy == nil {
		return l, nil, nil
	}
	if rerr := l.Release(ctx, db); rerr != nil && err == nil {
		err = rerr
	}
	return Lease{}, busy, err
}

// takeRate takes one push's share of a rate of perSecond pushes per second.
// The cell's theoretical arrival time (tat) moves on by one emission
// interval per push; a push is admitted while tat is within the burst's
// tolerance (one second less one interval) of now.
func takeRate(ctx context.Context, db dbutil.Executor, sub uuid.UUID, perSecond int32, now time.Time) (*Busy, error) {
	interval := time.Second / time.Duration(perSecond)
	tolerance := time.Second - interval
	q := dbsqlc.New()
	_, err := q.SubscriptionRateTake(ctx, db, dbsqlc.SubscriptionRateTakeParams{
		ID: sub, NextTat: now.Add(interval), Now: now, Horizon: now.Add(tolerance),
	})
	if err == nil {
		return nil, nil
	}
	if !dbutil.IsNotFound(err) {
		return nil, fmt.Errorf("taking a share of the push rate: %w", err)
	}
	tat, err := q.SubscriptionRateGet(ctx, db, sub)
	if err != nil {
		return nil, fmt.Errorf("reading the push rate: %w", err)
	}
	return &Busy{Limit: perSecond, Wait: max(tat.Sub(now)-tolerance, time.Millisecond)}, nil
}
