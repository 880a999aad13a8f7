// Package usage counts API requests per key and UTC day, and the last time
// each key was used, in memory. A background loop flushes the counts in one
// batched statement per interval, so serving a request never costs a
// database write.
package usage

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

type dayKey struct {
	key uuid.UUID
	day time.Time
}

// Tracker accumulates usage between flushes. It is safe for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	lastUsed map[uuid.UUID]time.Time
	counts   map[dayKey]int64
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{lastUsed: map[uuid.UUID]time.Time{}, counts: map[dayKey]int64{}}
}

// Record notes one request made with key at now.
func (t *Tracker) Record(key uuid.UUID, now time.Time) {
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	t.mu.Lock()
	if now.After(t.lastUsed[key]) {
		t.lastUsed[key] = now
	}
	t.counts[dayKey{key, day}]++
	t.mu.Unlock()
}

// Flush writes what was recorded since the last flush. On failure the
// counts are put back so that the next flush retries them.
func (t *Tracker) Flush(ctx context.Context, db dbutil.Executor) error {
	t.mu.Lock()
	lastUsed, counts := t.lastUsed, t.counts
	t.lastUsed, t.counts = map[uuid.UUID]time.Time{}, map[dayKey]int64{}
	t.mu.Unlock()
	if len(lastUsed) == 0 && len(counts) == 0 {
		return nil
	}

	touch := dbsqlc.APIKeyTouchManyParams{}
	for id, at := range lastUsed {
		touch.Ids = append(touch.Ids, id)
		touch.UsedAt = append(touch.UsedAt, at)
	}
	add := dbsqlc.APIUsageAddManyParams{}
	for k, n := range counts {
		add.APIKeyIDs = append(add.APIKeyIDs, k.key)
		add.Days = append(add.Days, k.day)
		add.Requests = append(add.Requests, n)
	}
	q := dbsqlc.New()
	err := dbutil.WithTx(ctx, db, func(ctx context.Context, tx dbutil.Tx) error {
		if err := q.APIKeyTouchMany(ctx, tx, touch); err != nil {
			return err
		}
		return q.APIUsageAddMany(ctx, tx, add)
	})
	if err != nil {
		t.mu.Lock()
		for id, at := range lastUsed {
			if at.After(t.lastUsed[id]) {
				t.lastUsed[id] = at
			}
		}
		for k, n := range counts {
			t.counts[k] += n
		}
		t.mu.Unlock()
		return err
	}
	return nil
}

// Run flushes every interval until ctx ends, then flushes once more.
func (t *Tracker) Run(ctx context.Context, db dbutil.Executor, interval time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := t.Flush(flushCtx, db); err != nil {
				logger.Warn("error flushing API usage at shutdown", slog.Any("error", err))
			}
			cancel()
			return
		case <-ticker.C:
			if err := t.Flush(ctx, db); err != nil {
				logger.Warn("error flushing API usage", slog.Any("error", err))
			}
		}
	}
}
