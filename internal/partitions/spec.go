// Package partitions keeps mailwatch's firehose tables partitioned by
// time (docs/partitions.md): it creates each table's range partitions
// ahead of the clock, and retention detaches and drops whole partitions
// instead of deleting their rows.
//
// Every table of Tables is range-partitioned on one column whose values
// grow with time: a timestamptz, or a UUIDv7 id (the bounds are then the
// smallest UUIDv7 of the boundary's millisecond, dbutil.UUIDv7Floor). Each
// has a DEFAULT partition for rows outside every range (a provider's
// arbitrary occurred_at, a row of a week whose partition does not exist
// yet), and may have one "legacy" partition from MINVALUE: the table as it
// was before it was partitioned, attached in place by its migration.
package partitions

import (
	"time"

	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/providers"
)

// Interval is the span of one partition. Boundaries are in UTC: days start
// at midnight, weeks on Monday (ISO weeks, Postgres's date_trunc('week')),
// months on the first.
type Interval int

// Intervals.
const (
	Day Interval = iota + 1
	Week
	Month
)

// Start returns the boundary at or before t.
func (i Interval) Start(t time.Time) time.Time {
	t = t.UTC()
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch i {
	case Week:
		// Monday is day 0 of an ISO week.
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case Month:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return d
}

// Next returns the boundary after the boundary b.
func (i Interval) Next(b time.Time) time.Time {
	switch i {
	case Week:
		return b.AddDate(0, 0, 7)
	case Month:
		return b.AddDate(0, 1, 0)
	}
	return b.AddDate(0, 0, 1)
}

// String names the interval in logs.
func (i Interval) String() string {
	switch i {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return "unknown"
}

// Key is what the partition column holds.
type Key int

// Keys.
const (
	// TimeKey: a timestamptz column.
	TimeKey Key = iota
	// UUIDv7Key: a UUIDv7 id made when the row was (occurs when the table is
	// only ever read by id: every lookup then reads one partition).
	UUIDv7Key
)

// Settings are the operator's settings retention follows.
type Settings struct {
	// EventRetentionDays is EVENT_RETENTION_DAYS, the longest any plan keeps
	// events; zero or less drops nothing from the tables that follow it.
	EventRetentionDays int
}

// Spec is one partitioned table.
type Spec struct {
	// Table is the partitioned (parent) table; its partitions are named
	// Table_pYYYYMMDD after their lower bound, Table_default and
	// Table_legacy.
	Table string
	// Column is the partition key.
	Column string
	Key    Key
	// Interval is the span of each partition.
	Interval Interval
	// Ahead is how many partitions after the current one exist at all times.
	Ahead int
	// Retention is how long rows are kept at least: a partition is dropped
	// once its upper bound is that far in the past (so a row stays at most
	// one Interval longer). Zero keeps every partition.
	Retention func(Settings) time.Duration
	// Keep, when set, is an SQL condition over the table's columns: the rows
	// of a dropped partition that match it are copied back into the table
	// (they land in the DEFAULT partition, their range being gone) before the
	// partition is dropped, in the same transaction.
	Keep string
	// Rollups are tables (with account_id and hour timestamptz columns)
	// that count this table's rows per hour: a dropped partition's hours are
	// deleted from them in the same transaction, before Keep's rows are
	// copied back (so the copied rows are counted again by the rollups'
	// insert triggers, and the rollups keep equalling a recount).
	Rollups []string
	// Daily are tables (with account_id and day date columns) kept from
	// Rollups' hours by row triggers: a dropped partition's days (every
	// partition starts and ends at a UTC midnight) are deleted from them
	// in one statement each, and the row triggers skipped for the hourly
	// deletes (the mailwatch.rollup_bulk flag), which would otherwise
	// update the daily rows one hourly row at a time while the table is
	// locked against every writer.
	Daily []string
	// Children are tables partitioned alike whose partition key references
	// this table's by a foreign key (listed before it in Tables, so their
	// partitions of a range go first). Before a partition is detached, the
	// rows of its range in a child's DEFAULT partition (none, unless the
	// child's partition could not be made in time) are deleted: Postgres
	// refuses to detach a partition that rows still refer to.
	Children []Child
}

// Child is a table referencing a Spec's table (Spec.Children).
type Child struct {
	Table, Column string
}

// days is n days as a duration; n <= 0 is zero (keep everything).
func days(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(n) * 24 * time.Hour
}

// EventRetention is EVENT_RETENTION_DAYS.
func EventRetention(s Settings) time.Duration { return days(s.EventRetentionDays) }

// MessageEventRetention is how long message events are kept: as long as
// events, and never less than the spike checks look back
// (providers.SpikeHistory: the window and its baseline before it).
func MessageEventRetention(s Settings) time.Duration {
	r := EventRetention(s)
	if r == 0 {
		return 0
	}
	return max(r, providers.SpikeHistory)
}

// PayloadRetention is how long provider payloads are kept: their replay
// keys' retention (esp.ReplayRetention), which PROVIDER_WEBHOOK_MAX_AGE
// is bounded by.
func PayloadRetention(Settings) time.Duration { return esp.ReplayRetention }

// Tables are the partitioned tables, in the order Maintain works them: a
// table whose rows reference another's by a foreign key comes first, so
// that its partition is gone before the referenced one is dropped.
var Tables = []Spec{
	{
		Table: "message_events", Column: "occurred_at", Key: TimeKey, Interval: Week, Ahead: 2,
		Retention: MessageEventRetention,
		Rollups:   []string{"message_event_domain_hourly", "message_event_account_hourly"},
		Daily:     []string{"message_event_domain_daily", "message_event_account_daily"},
	},
	{
		Table: "provider_payloads", Column: "id", Key: UUIDv7Key, Interval: Day, Ahead: 3,
		Retention: PayloadRetention,
		// A payload never normalised (its jobs never ran) is kept for an
		// operator, as the row-by-row prune kept it.
		Keep: "processed_at IS NULL",
	},
	{
		Table: "events", Column: "created_at", Key: TimeKey, Interval: Week, Ahead: 2,
		Retention: EventRetention,
		// An alert nobody acknowledged still needs a person: it outlives the
		// retention, as the row-by-row prune kept it.
		Keep:    "severity = 'critical' AND acknowledged_at IS NULL",
		Rollups: []string{"event_counts_hourly", "alert_open_counts"},
		Daily:   []string{"event_counts_daily"},
	},
	{
		Table: "webhook_delivery_attempts", Column: "delivery_id", Key: UUIDv7Key, Interval: Week, Ahead: 2,
		Retention: EventRetention,
	},
	{
		Table: "webhook_deliveries", Column: "id", Key: UUIDv7Key, Interval: Week, Ahead: 2,
		Retention: EventRetention,
		Rollups:   []string{"delivery_open_counts"},
		Children:  []Child{{Table: "webhook_delivery_attempts", Column: "delivery_id"}},
	},
	{
		// By the UUIDv7 of the report (every read is by report). Reports are
		// kept as long as their domain: no Retention, nothing dropped.
		Table: "dmarc_records", Column: "report_id", Key: UUIDv7Key, Interval: Month, Ahead: 2,
	},
}

// Lookup returns the spec of table.
func Lookup(table string) (Spec, bool) {
	for _, s := range Tables {
		if s.Table == table {
			return s, true
		}
	}
	return Spec{}, false
}
