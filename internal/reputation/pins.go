package reputation

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Bounds of the IP ranges pinned on a domain; doc.go explains them.
const (
	// MaxPinAddresses bounds the addresses of one pin: an IPv4 prefix of
	// /24 or longer, an IPv6 prefix of /120 or longer.
	MaxPinAddresses = 256
	// MaxPins bounds the pins of a domain.
	MaxPins = 16
	// MaxPinnedAddresses bounds the addresses of all the pins of a domain.
	MaxPinnedAddresses = 1024
	// MaxPinNote bounds a pin's note, in characters.
	MaxPinNote = 200
	// maxPinInput bounds the text ParsePin reads.
	maxPinInput = 64
)

// ErrPinInvalid is wrapped by every error of a pin the bounds refuse; its
// message is meant for the user (a 422's detail).
var ErrPinInvalid = errors.New("invalid pin")

// ErrPinConflict is wrapped when the range is pinned already or overlaps a
// pin of the domain.
var ErrPinConflict = errors.New("pin conflict")

// ErrPinNotFound is returned for a pin the domain does not have.
var ErrPinNotFound = errors.New("reputation: pin not found")

// Pin is an IP range pinned on a domain.
type Pin struct {
	// CIDR is the canonical prefix: masked, an IPv4 range in dotted form.
	CIDR string `json:"cidr"`
	Note string `json:"note"`
	// Addresses is the number of addresses it covers, each a watched IP.
	Addresses int       `json:"addresses"`
	CreatedAt time.Time `json:"created_at"`
}

// PinError is a pin the bounds refuse: which field ("cidr" or "note") and
// why, for the user. It is ErrPinInvalid to errors.Is.
type PinError struct {
	Field, Message string
}

func (e *PinError) Error() string { return ErrPinInvalid.Error() + ": " + e.Message }

// Is makes a PinError match ErrPinInvalid.
func (e *PinError) Is(target error) bool { return target == ErrPinInvalid }

func invalidPin(format string, args ...any) error {
	return &PinError{Field: "cidr", Message: fmt.Sprintf(format, args...)}
}

// ParsePin reads a pinned range: a prefix ("192.0.2.0/30", "2001:db8::/124")
// or one address (a /32 or /128), and returns it masked (host bits
// cleared). It refuses a range of more than MaxPinAddresses addresses, an
// IPv4-mapped IPv6 range (pin its IPv4 form), and an address with a zone.
func ParsePin(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Prefix{}, invalidPin("the range is empty")
	}
	if len(s) > maxPinInput {
		return netip.Prefix{}, invalidPin("the range is longer than %d characters", maxPinInput)
	}
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, invalidPin("%q is not an IP prefix such as 192.0.2.0/30 or 2001:db8::/124", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, invalidPin("%q is not an IP address or prefix such as 192.0.2.0/30 or 2001:db8::/124", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, invalidPin("%q is an IPv4-mapped IPv6 range: pin its IPv4 form", s)
	}
	if n := pinSize(p); n > MaxPinAddresses {
		shortest := "/24"
		if p.Addr().Is6() {
			shortest = "/120"
		}
		return netip.Prefix{}, invalidPin("%s holds more than %d addresses: pin a %s or a longer prefix", p.Masked(), MaxPinAddresses, shortest)
	}
	return p.Masked(), nil
}

// pinSize is the number of addresses of p, capped at MaxPinAddresses+1.
func pinSize(p netip.Prefix) int {
	host := p.Addr().BitLen() - p.Bits()
	if host > 9 {
		return MaxPinAddresses + 1
	}
	return 1 << host
}

// pinAddresses lists the addresses of p (at most MaxPinAddresses).
func pinAddresses(p netip.Prefix) []netip.Addr {
	out := make([]netip.Addr, 0, pinSize(p))
	for a := p.Masked().Addr(); p.Contains(a) && len(out) < MaxPinAddresses; a = a.Next() {
		out = append(out, a)
		if !a.Next().IsValid() {
			break
		}
	}
	return out
}

func pinOf(row dbsqlc.ReputationPin) Pin {
	p, _ := netip.ParsePrefix(row.Cidr)
	return Pin{CIDR: row.Cidr, Note: row.Note, Addresses: pinSize(p), CreatedAt: row.CreatedAt.UTC()}
}

// Pins returns the domain's pins, oldest first.
func Pins(ctx context.Context, db dbsqlc.DBTX, account, domain uuid.UUID) ([]Pin, error) {
	rows, err := dbsqlc.New().ReputationPins(ctx, db, dbsqlc.ReputationPinsParams{AccountID: account, DomainID: domain})
	if err != nil {
		return nil, fmt.Errorf("reading pins: %w", err)
	}
	out := make([]Pin, len(rows))
	for i, r := range rows {
		out[i] = pinOf(r)
	}
	return out, nil
}

// checkNewPin holds a new pin to the bounds against the domain's pins.
func checkNewPin(p netip.Prefix, pins []dbsqlc.ReputationPin) error {
	total := pinSize(p)
	for _, r := range pins {
		have, err := netip.ParsePrefix(r.Cidr)
		if err != nil {
			continue
		}
		if have == p {
			return fmt.Errorf("%w: %s is pinned already", ErrPinConflict, p)
		}
		if have.Overlaps(p) {
			return fmt.Errorf("%w: %s overlaps the pin %s; remove it first", ErrPinConflict, p, have)
		}
		total += pinSize(have)
	}
	if len(pins) >= MaxPins {
		return invalidPin("the domain has %d pins already, the most it may have", MaxPins)
	}
	if total > MaxPinnedAddresses {
		return invalidPin("%s would bring the domain's pinned addresses to %d, more than %d", p, total, MaxPinnedAddresses)
	}
	return nil
}

// AddPin pins the range cidr (ParsePin) on the domain with an optional
// note, holding it to the bounds (ErrPinInvalid) and refusing a range
// pinned already or overlapping a pin (ErrPinConflict). In one transaction
// it stores the pin, recomputes the watch set (the pin's addresses become
// targets of origin "pinned") and queues a check of the domain, so that
// its addresses are looked up without waiting for the hourly schedule.
func AddPin(ctx context.Context, db dbutil.Executor, queue Queue, account, domain uuid.UUID, name, cidr, note string, now time.Time) (Pin, error) {
	p, err := ParsePin(cidr)
	if err != nil {
		return Pin{}, err
	}
	note = strings.TrimSpace(note)
	if !utf8.ValidString(note) || utf8.RuneCountInString(note) > MaxPinNote {
		return Pin{}, &PinError{Field: "note", Message: fmt.Sprintf("the note is longer than %d characters or not valid UTF-8 text", MaxPinNote)}
	}
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (Pin, error) {
		q := dbsqlc.New()
		if err := q.ReputationWatchLock(ctx, tx, domain.String()); err != nil {
			return Pin{}, fmt.Errorf("locking the watch set of %s: %w", name, err)
		}
		pins, err := q.ReputationPins(ctx, tx, dbsqlc.ReputationPinsParams{AccountID: account, DomainID: domain})
		if err != nil {
			return Pin{}, fmt.Errorf("reading pins: %w", err)
		}
		if err := checkNewPin(p, pins); err != nil {
			return Pin{}, err
		}
		row, err := q.ReputationPinAdd(ctx, tx, dbsqlc.ReputationPinAddParams{AccountID: account, DomainID: domain,
			Cidr: p.String(), Note: note})
		if err != nil {
			return Pin{}, fmt.Errorf("storing pin: %w", err)
		}
		if err := refreshLocked(ctx, tx, account, domain, name, now); err != nil {
			return Pin{}, err
		}
		if queue != nil {
			if _, err := queue.InsertTx(ctx, tx, CheckArgs{DomainID: domain}, nil); err != nil {
				return Pin{}, fmt.Errorf("queueing blocklist check: %w", err)
			}
		}
		return pinOf(row), nil
	})
}

// DeletePin removes the pin cidr (any spelling ParsePin reads) from the
// domain and recomputes the watch set in the same transaction: its
// addresses stop being watched, unless the reports make them sources of
// the domain, and their current listings end without an event (the rows
// stay, with delisted_at, as history).
func DeletePin(ctx context.Context, db dbutil.Executor, account, domain uuid.UUID, name, cidr string, now time.Time) error {
	p, err := ParsePin(cidr)
	if err != nil {
		return ErrPinNotFound // no pin can have that spelling
	}
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		q := dbsqlc.New()
		if err := q.ReputationWatchLock(ctx, tx, domain.String()); err != nil {
			return fmt.Errorf("locking the watch set of %s: %w", name, err)
		}
		n, err := q.ReputationPinDelete(ctx, tx, dbsqlc.ReputationPinDeleteParams{AccountID: account, DomainID: domain, Cidr: p.String()})
		if err != nil {
			return fmt.Errorf("deleting pin: %w", err)
		}
		if n == 0 {
			return ErrPinNotFound
		}
		return refreshLocked(ctx, tx, account, domain, name, now)
	})
}

// pinnedAddresses expands the domain's pins into their addresses, sorted.
func pinnedAddresses(pins []dbsqlc.ReputationPin) []string {
	var out []string
	for _, r := range pins {
		p, err := netip.ParsePrefix(r.Cidr)
		if err != nil {
			continue
		}
		for _, a := range pinAddresses(p) {
			if len(out) < MaxPinnedAddresses { // the bounds hold it; this keeps the promise if they change
				out = append(out, a.String())
			}
		}
	}
	sort.Strings(out)
	return out
}
