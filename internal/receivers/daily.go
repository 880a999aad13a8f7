package receivers

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// Messages received per account and UTC day (receiver_message_days, kept
// by a trigger on every insert): they outlive the receivers and messages
// that the expiry job purges.

// DayRetention is how long the daily counts are kept; Expire prunes
// older ones.
const DayRetention = 90 * 24 * time.Hour

// MaxDailyDays bounds the days one DailyVolume read covers.
const MaxDailyDays = 90

// Day is one UTC day of messages received, per channel.
type Day struct {
	Day        time.Time
	Email, SMS int64
}

// DailyVolume returns the account's messages received per UTC day from
// since to until (both included, at most MaxDailyDays, the newest kept),
// oldest first, days without messages included as zero.
func DailyVolume(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID, since, until time.Time) ([]Day, error) {
	since, until = since.UTC().Truncate(24*time.Hour), until.UTC().Truncate(24*time.Hour)
	if until.Before(since) {
		return nil, fmt.Errorf("receivers: until %s is before since %s", until.Format(time.DateOnly), since.Format(time.DateOnly))
	}
	if int(until.Sub(since)/(24*time.Hour))+1 > MaxDailyDays {
		since = until.AddDate(0, 0, 1-MaxDailyDays)
	}
	rows, err := dbsqlc.New().ReceiverMessageDays(ctx, db, dbsqlc.ReceiverMessageDaysParams{AccountID: accountID, Since: since, Until: until})
	if err != nil {
		return nil, fmt.Errorf("reading messages per day: %w", err)
	}
	var out []Day
	index := map[time.Time]int{}
	for d := since; !d.After(until); d = d.AddDate(0, 0, 1) {
		index[d] = len(out)
		out = append(out, Day{Day: d})
	}
	for _, r := range rows {
		i, ok := index[r.Day]
		if !ok {
			continue
		}
		switch r.Channel {
		case ChannelSMS:
			out[i].SMS += r.Messages
		default:
			out[i].Email += r.Messages
		}
	}
	return out, nil
}

// pruneDays deletes the daily counts older than DayRetention, purgeBatch
// rows per statement.
func pruneDays(ctx context.Context, db dbsqlc.DBTX, now time.Time) (int64, error) {
	var total int64
	before := now.Add(-DayRetention).UTC().Truncate(24 * time.Hour)
	for {
		n, err := dbsqlc.New().ReceiverMessageDaysPrune(ctx, db, dbsqlc.ReceiverMessageDaysPruneParams{Before: before, Max: purgeBatch})
		if err != nil {
			return total, fmt.Errorf("pruning messages per day: %w", err)
		}
		total += n
		if n < purgeBatch || ctx.Err() != nil {
			return total, nil
		}
	}
}
