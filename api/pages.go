package api

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/mailwatch/mailwatch/internal/events"
)

// Page is one page of a keyset-paginated listing, the one page type of
// every REST list: the body is a JSON array of T, and whenever a next page
// exists its cursor travels in the X-Next-Cursor header and its URL in the
// Link header (rel="next"); both are absent on the last page.
type Page[T any] struct {
	Items []T
	// raw, when set, holds the items already rendered as JSON objects.
	raw  [][]byte
	next string
	// path and query rebuild the next page's URL for Link.
	path  string
	query url.Values
}

// newPage is a page of items at path; query holds the listing's filters
// (without the cursor), which the next page's URL repeats.
func newPage[T any](items []T, path string, query url.Values) *Page[T] {
	return &Page[T]{Items: items, path: path, query: query}
}

// setNext records the next page's cursor ("" on the last page).
func (p *Page[T]) setNext(cursor string) { p.next = cursor }

// setNextIfFull sets the next page's cursor, last(), when the page holds
// limit items: the listings that fetch no extra row to know whether more
// follow offer a next page after every full one.
func (p *Page[T]) setNextIfFull(limit int, last func() string) {
	if limit > 0 && len(p.Items) == limit {
		p.next = last()
	}
}

// domainListPath is the path of a listing under a domain.
func domainListPath(domain, list string) string {
	return "/api/accounts/me/domains/" + url.PathEscape(domain) + "/" + list
}

// limitQuery is the query of a listing whose only filter is its page size.
func limitQuery(limit int) url.Values { return url.Values{"limit": {strconv.Itoa(limit)}} }

// cursorString is the text of an events cursor; "" for none.
func cursorString(c *events.Cursor) string {
	if c == nil {
		return ""
	}
	return c.String()
}

// MarshalJSON writes the items only.
func (p *Page[T]) MarshalJSON() ([]byte, error) { return p.AppendJSON(nil) }

// OpenAPIBody documents the body as an array of T.
func (p *Page[T]) OpenAPIBody() any { return new([]T) }

// OpenAPIHeaders documents the pagination headers.
func (p *Page[T]) OpenAPIHeaders() any { return new(pageHeaders) }

// pageHeaders documents the pagination headers of a listing.
type pageHeaders struct {
	NextCursor string `header:"X-Next-Cursor" description:"Opaque cursor of the next page; absent on the last page. Pass it as ?cursor= with the same filters."`
	Link       string `header:"Link" description:"RFC 8288 link to the next page (rel=\"next\"); absent on the last page."`
}

// ResponseHeaders implements HeaderSetter: both headers, or none on the
// last page.
func (p *Page[T]) ResponseHeaders() map[string]string {
	if p.next == "" {
		return nil
	}
	q := url.Values{}
	for k, v := range p.query {
		q[k] = v
	}
	q.Set("cursor", p.next)
	return map[string]string{
		"X-Next-Cursor": p.next,
		"Link":          "<" + p.path + "?" + q.Encode() + `>; rel="next"`,
	}
}

// Entries returns the page's items, decoding one by one those a listing
// keeps rendered as JSON (the events' first-page cache).
func (p *Page[T]) Entries() ([]T, error) {
	if p.Items != nil || p.raw == nil {
		return p.Items, nil
	}
	out := make([]T, len(p.raw))
	for i, r := range p.raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("decoding a listed item: %w", err)
		}
	}
	return out, nil
}
