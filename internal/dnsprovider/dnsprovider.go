// Package dnsprovider writes DNS changes into a customer's zone through a
// DNS connection, with a compare-and-swap: a change carries the whole RRset
// it was computed from and is applied only if the zone still holds exactly
// that RRset. A concurrent edit therefore makes the change fail with a
// *ConflictError instead of being clobbered.
//
// Three kinds are supported, each with its provider's own primitive:
//   - rfc2136: RFC 2136 dynamic update signed with TSIG (RFC 8945). The
//     prerequisite section carries the observed RRset ("RRset exists,
//     value dependent", section 2.4.2) or, for a new RRset, "RRset does not
//     exist" (section 2.4.3), so the server itself refuses a stale change
//     (NXRRSET). Only the records removed and added are touched.
//   - cloudflare: the v4 REST API; the observed records are matched by
//     their ids and the change is one batch (deletes then posts) that names
//     those ids, so other records at the name are left alone.
//   - route53: a ChangeResourceRecordSets batch of DELETE (the exact old
//     values and TTL) and CREATE; Route 53 rejects the whole batch when the
//     DELETE does not match, which is the compare-and-swap.
//
// Values are RDATA in presentation form, except TXT, whose value is the
// record's text with its character-strings joined (what an SPF or DMARC
// parser reads).
package dnsprovider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/netguard"
)

// Kinds of connection.
const (
	KindRFC2136    = "rfc2136"
	KindCloudflare = "cloudflare"
	KindRoute53    = "route53"
)

// Kinds returns the supported kinds.
func Kinds() []string { return []string{KindRFC2136, KindCloudflare, KindRoute53} }

// Op names what a change does to its RRset, in the words of the API.
const (
	OpCreate       = "create"        // adds records to an RRset (empty or not) without removing any
	OpReplaceRR    = "replace_rr"    // replaces some records of the RRset, keeping the others
	OpReplaceRRset = "replace_rrset" // replaces the whole RRset
	OpDeleteRR     = "delete_rr"     // removes some records
)

// DefaultTTL is the TTL of records a change adds when it does not say.
const DefaultTTL = 3600

// Zone identifies the zone a name lives in at a provider.
type Zone struct {
	// Name is the zone's apex, lower case, no trailing dot.
	Name string `json:"name"`
	// ID is the provider's identifier of the zone (Cloudflare zone id,
	// Route 53 hosted zone id); for rfc2136 it is the zone's name.
	ID string `json:"id"`
}

// RRset is the records of one name and type.
type RRset struct {
	TTL    uint32   `json:"ttl"`
	Values []string `json:"values"`
}

// Change is one compare-and-swap on one RRset.
type Change struct {
	// Name is the owner name, lower case, no trailing dot.
	Name string `json:"name"`
	// Type is the record type ("TXT", "MX", ...).
	Type string `json:"type"`
	// TTL applies to added records (DefaultTTL when 0).
	TTL uint32 `json:"ttl"`
	// Current is the whole RRset the change was computed from; the change
	// applies only while the zone holds exactly these values. Empty means
	// the RRset must not exist.
	Current []string `json:"current"`
	// Remove are values of Current the change removes.
	Remove []string `json:"remove"`
	// Add are values the change adds.
	Add []string `json:"add"`
}

// Proposed returns the RRset after the change.
func (c Change) Proposed() []string {
	out := []string{}
	for _, v := range c.Current {
		if !slices.Contains(c.Remove, v) {
			out = append(out, v)
		}
	}
	for _, v := range c.Add {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Op returns the change's Op* word.
func (c Change) Op() string {
	switch {
	case len(c.Remove) == 0:
		return OpCreate
	case len(c.Add) == 0:
		return OpDeleteRR
	case len(c.Remove) == len(c.Current):
		return OpReplaceRRset
	default:
		return OpReplaceRR
	}
}

func (c Change) ttl() uint32 {
	if c.TTL == 0 {
		return DefaultTTL
	}
	return c.TTL
}

// Validate checks that the change is well formed: Remove within Current,
// a type and name given.
func (c Change) Validate() error {
	if c.Name == "" || c.Type == "" {
		return errors.New("a change needs a name and a type")
	}
	for _, v := range c.Remove {
		if !slices.Contains(c.Current, v) {
			return fmt.Errorf("the change removes %q, which is not in the current RRset", v)
		}
	}
	if len(c.Remove) == 0 && len(c.Add) == 0 {
		return errors.New("the change changes nothing")
	}
	return nil
}

// ErrConflict is matched (errors.Is) by every *ConflictError.
var ErrConflict = errors.New("the record changed since it was observed")

// ConflictError reports that the zone no longer holds the RRset a change
// was computed from. Current is what the zone holds now, when the
// provider could read it.
type ConflictError struct {
	Current []string
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: the zone now holds %q", ErrConflict.Error(), e.Current)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ErrZoneNotFound is returned by FindZone when no zone of the connection
// holds the name.
var ErrZoneNotFound = errors.New("no zone of this connection holds the name")

// ErrBadAnswer is an answer the provider's API gave that is not its API's
// shape (an HTML error page from a proxy, a truncated body): the provider is
// reachable but not usable now.
var ErrBadAnswer = errors.New("the provider's answer could not be read")

// ProviderError is an error the provider answered (a refused key, a
// rejected request), as opposed to a network failure. Its message is the
// provider's own, fit to show the customer.
type ProviderError struct {
	// What names the operation that failed ("TSIG key", "API token").
	What    string
	Message string
}

// Error implements error.
func (e *ProviderError) Error() string { return e.What + ": " + e.Message }

// Provider is one DNS connection.
type Provider interface {
	// Kind returns the Kind* constant.
	Kind() string
	// Verify checks the credentials by a read, returning a *ProviderError
	// when the provider refuses them.
	Verify(ctx context.Context) error
	// FindZone returns the zone that holds name (ErrZoneNotFound when
	// none of the connection's zones does), after checking that the
	// connection may write to it where the provider can tell.
	FindZone(ctx context.Context, name string) (Zone, error)
	// Read returns the RRset of name and typ (empty when none).
	Read(ctx context.Context, zone Zone, name, typ string) (RRset, error)
	// Apply makes the change if the RRset is still c.Current, else returns
	// a *ConflictError.
	Apply(ctx context.Context, zone Zone, c Change) error
	// Plan returns the exact update Apply would send, for a dry run.
	Plan(zone Zone, c Change) (any, error)
}

// sameSet reports whether a and b hold the same values, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// SameSet reports whether two RRsets' values are equal as sets.
func SameSet(a, b []string) bool { return sameSet(a, b) }

// normName lower-cases a name and removes its trailing dot.
func normName(s string) string { return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".") }

// parents returns name and each of its ancestors with at least two labels,
// nearest first: a.b.example.com, b.example.com, example.com.
func parents(name string) []string {
	name = normName(name)
	var out []string
	for {
		out = append(out, name)
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return out
		}
		name = name[i+1:]
		if !strings.Contains(name, ".") {
			return out
		}
	}
}

// QuoteTXT returns a TXT value as quoted character-strings of at most 255
// bytes each (RFC 1035 section 3.3.14), the form Route 53 and Cloudflare
// take.
func QuoteTXT(v string) string {
	var b strings.Builder
	for i, chunk := range splitTXT(v) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		for j := 0; j < len(chunk); j++ {
			c := chunk[j]
			if c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteByte('"')
	}
	return b.String()
}

// UnquoteTXT joins the quoted character-strings of a TXT value; a value
// that does not start with a quote is returned as it is.
func UnquoteTXT(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, `"`) {
		return s
	}
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			in = !in
		case c == '\\' && in && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case in:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// splitTXT splits a TXT value into character-strings of at most 255 bytes.
func splitTXT(v string) []string {
	if v == "" {
		return []string{""}
	}
	var out []string
	for len(v) > 255 {
		out = append(out, v[:255])
		v = v[255:]
	}
	return append(out, v)
}

// NewHTTPClient returns the HTTP client API-based connections use: every
// dial goes through the guard (netguard), no redirects are followed and
// each request is bounded.
func NewHTTPClient(g *netguard.Guard) *http.Client {
	return &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{DialContext: g.Dialer(&net.Dialer{Timeout: 10 * time.Second}).DialContext, TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
