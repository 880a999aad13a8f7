package events

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Order is the direction of a listing.
type Order string

// Orders.
const (
	OrderDesc Order = "desc" // newest first (the default)
	OrderAsc  Order = "asc"  // oldest first: a forward feed
)

// Cursor is a position in a listing: the (created_at, id) of the last row
// a page returned. Listings are keyset-paginated on that pair, so pages
// never repeat rows, even among equal timestamps. created_at is when the
// event was raised, not when its transaction committed: a forward (asc)
// reader can pass the position of an event that commits a moment later,
// so forward feeds re-read a short overlap (see the listing's docs).
type Cursor struct {
	At time.Time
	ID uuid.UUID
}

const cursorVersion = 1

// ErrMalformedCursor is returned by ParseCursor.
var ErrMalformedCursor = errors.New("malformed cursor")

// String encodes c as an opaque, URL-safe token.
func (c Cursor) String() string {
	var b [25]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(c.At.UnixMicro()))
	copy(b[9:], c.ID[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ParseCursor decodes a token made by Cursor.String.
func ParseCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 25 || b[0] != cursorVersion {
		return Cursor{}, ErrMalformedCursor
	}
	micros := int64(binary.BigEndian.Uint64(b[1:9]))
	var id uuid.UUID
	copy(id[:], b[9:])
	return Cursor{At: time.UnixMicro(micros).UTC(), ID: id}, nil
}

// ListFilter selects one page of an account's events or alerts.
type ListFilter struct {
	AccountID uuid.UUID
	// Type limits the listing to one event type; "" lists every type.
	Type string
	// Since, when set, keeps events created strictly after it.
	Since *time.Time
	// After, when set, continues a listing after this position.
	After *Cursor
	Order Order
	// Limit is the page size (at least 1).
	Limit int
	// AlertsOnly lists critical events only.
	AlertsOnly bool
	// Acknowledged, with AlertsOnly, keeps acknowledged (true) or
	// unacknowledged (false) alerts; nil keeps both.
	Acknowledged *bool
}

const eventColumns = "id, account_id, event_type, severity, domain, tags, payload, created_at, " +
	"acknowledged_at, acknowledged_by, acknowledged_note, acknowledged_key"

// ListQuery returns the statement and arguments of one page of f, fetching
// limit+1 rows so the caller can tell whether another page follows.
//
// The statement is assembled from fixed fragments rather than written once
// with "$n IS NULL OR ..." guards: a prepared statement's generic plan
// cannot use an index for such guards, and the partial indexes of alerts
// (severity = 'critical' [AND acknowledged_at IS NULL]) are only chosen
// when the query states those predicates literally. Every variant is an
// index range scan bounded by account_id (see schema/0002_events.sql).
func ListQuery(f ListFilter) (string, []any) { return listQuery(f, eventColumns) }

func listQuery(f ListFilter, columns string) (string, []any) {
	var (
		where = []string{"account_id = $1"}
		args  = []any{f.AccountID}
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Type != "" {
		where = append(where, "event_type = "+arg(f.Type))
	}
	if f.AlertsOnly {
		where = append(where, "severity = 'critical'")
		if f.Acknowledged != nil {
			if *f.Acknowledged {
				where = append(where, "acknowledged_at IS NOT NULL")
			} else {
				where = append(where, "acknowledged_at IS NULL")
			}
		}
	}
	if f.Since != nil {
		where = append(where, "created_at > "+arg(*f.Since))
	}
	dir, cmp := "DESC", "<"
	if f.Order == OrderAsc {
		dir, cmp = "ASC", ">"
	}
	if f.After != nil {
		where = append(where, fmt.Sprintf("(created_at, id) %s (%s, %s)", cmp, arg(f.After.At), arg(f.After.ID)))
	}
	limit := max(f.Limit, 1)
	sql := "SELECT " + columns + " FROM events WHERE " + strings.Join(where, " AND ") +
		fmt.Sprintf(" ORDER BY created_at %s, id %s LIMIT %s", dir, dir, arg(limit+1))
	return sql, args
}

// List returns one page of f and, when more rows follow, the cursor of the
// next page.
func List(ctx context.Context, db dbutil.Executor, f ListFilter) ([]dbsqlc.Event, *Cursor, error) {
	sql, args := ListQuery(f)
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("error listing events: %w", err)
	}
	defer rows.Close()
	limit := max(f.Limit, 1)
	out := make([]dbsqlc.Event, 0, min(limit, 256))
	more := false
	for rows.Next() {
		if len(out) == limit {
			more = true
			break
		}
		var (
			e       dbsqlc.Event
			payload []byte // raw jsonb text: scanning into json.RawMessage would re-parse it
		)
		if err := rows.Scan(&e.ID, &e.AccountID, &e.EventType, &e.Severity, &e.Domain, &e.Tags, &payload, &e.CreatedAt,
			&e.AcknowledgedAt, &e.AcknowledgedBy, &e.AcknowledgedNote, &e.AcknowledgedKey); err != nil {
			return nil, nil, fmt.Errorf("error reading events: %w", err)
		}
		e.Payload = payload
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("error listing events: %w", err)
	}
	if !more {
		return out, nil, nil
	}
	last := out[len(out)-1]
	return out, &Cursor{At: last.CreatedAt, ID: last.ID}, nil
}

// ListRendered is List for the events listing: each item is the event's
// stored API representation (see Rendered), sent without decoding. Items
// come back exactly as the API sends them: an older row's HTML-safe escapes
// are undone here, once per read, so serving (and the first-page cache)
// copies the bytes as they are.
func ListRendered(ctx context.Context, db dbutil.Executor, f ListFilter) ([][]byte, *Cursor, error) {
	sql, args := listQuery(f, "id, created_at, rendered")
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("error listing events: %w", err)
	}
	defer rows.Close()
	limit := max(f.Limit, 1)
	out := make([][]byte, 0, min(limit, 256))
	var last Cursor
	more := false
	for rows.Next() {
		if len(out) == limit {
			more = true
			break
		}
		var r []byte
		if err := rows.Scan(&last.ID, &last.At, &r); err != nil {
			return nil, nil, fmt.Errorf("error reading events: %w", err)
		}
		out = append(out, asServed(r))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("error listing events: %w", err)
	}
	if !more {
		return out, nil, nil
	}
	return out, &last, nil
}
