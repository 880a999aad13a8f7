package reputation

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// AddrWait bounds how long one list's lookup of an address waits for its
// turn (the list's query pace) and its answer. A list that does not answer
// in time is reported as unchecked; the rest of the answers stand.
const AddrWait = 5 * time.Second

// AddrListing is one list that lists an address.
type AddrListing struct {
	Zone string
	// List is the list's name from the catalog.
	List   string
	Codes  []Code
	Reason string
	// Informational is true for a policy listing (Spamhaus PBL, say) that
	// says what kind of address it is rather than that it sent spam.
	Informational bool
}

// Detail says in a few words what the list answered: its codes with their
// names ("127.0.0.2 SBL"), else its reason.
func (l AddrListing) Detail() string {
	parts := make([]string, 0, len(l.Codes))
	for _, c := range l.Codes {
		parts = append(parts, strings.TrimSpace(c.Code+" "+c.Name))
	}
	if len(parts) == 0 {
		return l.Reason
	}
	return strings.Join(parts, ", ")
}

// AddrResult is what the configured lists say about one address.
type AddrResult struct {
	// Listings are the lists that list the address, in list order.
	Listings []AddrListing
	// Checked counts the lists that gave a usable answer.
	Checked int
	// Unchecked names the lists that gave none: unhealthy (or never judged
	// healthy), refusing, or too slow.
	Unchecked []string
}

// LookupAddr looks ip up on every healthy IP list, through the same shared
// cache and per-list pace as the domains' checks, so that an address both
// a domain's reports and a received message name costs one lookup. It
// stores no listing and emits no event: the caller (the analysis of a
// received message) reports what it found. The lists are asked at once;
// each waits at most AddrWait. An error is returned only when no list can
// be asked at all (the cache unreadable, ctx done).
func (c *Checker) LookupAddr(ctx context.Context, db dbutil.Executor, ip netip.Addr, now time.Time) (AddrResult, error) {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		res AddrResult
	)
	type answer struct {
		listing *AddrListing
		ok      bool
		err     error
	}
	ip = ip.Unmap()
	answers := make([]answer, len(c.Lists))
	for i, l := range c.Lists {
		if l.Kind != blocklist.KindIP {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lctx, cancel := context.WithTimeout(ctx, AddrWait)
			defer cancel()
			a := answer{}
			defer func() {
				mu.Lock()
				answers[i] = a
				mu.Unlock()
			}()
			if !c.healthy(lctx, l, now) {
				return
			}
			entry, _, ok, err := c.lookup(lctx, db, l, ip.String(), now)
			if err != nil {
				// A list that ran out of its own time is unchecked; the
				// caller's end, or a broken cache, is the check's failure.
				if ctx.Err() == nil && errors.Is(lctx.Err(), context.DeadlineExceeded) {
					return
				}
				a.err = err
				return
			}
			a.ok = ok
			if !ok || entry.Status != string(blocklist.Listed) {
				return
			}
			var codes []Code
			_ = json.Unmarshal(entry.Codes, &codes)
			a.listing = &AddrListing{Zone: l.Zone, List: l.Name, Codes: nonNil(codes), Reason: entry.Reason,
				Informational: isInformational(l, codes)}
		}()
	}
	wg.Wait()
	var firstErr error
	for i, l := range c.Lists {
		if l.Kind != blocklist.KindIP {
			continue
		}
		a := answers[i]
		switch {
		case a.err != nil:
			if firstErr == nil {
				firstErr = a.err
			}
			res.Unchecked = append(res.Unchecked, l.Zone)
		case !a.ok:
			res.Unchecked = append(res.Unchecked, l.Zone)
		default:
			res.Checked++
			if a.listing != nil {
				res.Listings = append(res.Listings, *a.listing)
			}
		}
	}
	if res.Checked == 0 && firstErr != nil {
		return AddrResult{}, firstErr
	}
	return res, nil
}
