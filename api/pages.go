package api

import (
	"encoding/json"
	"fmt"
	"net/url"
)

// ArrayPage is one page of a keyset-paginated listing: the body is a JSON
// array of T, encoded once, and the next page's cursor travels in the
// X-Next-Cursor and Link headers (absent on the last page).
type ArrayPage[T any] struct {
	Items []T
	next  string
	// path and query rebuild the next page's URL for Link.
	path  string
	query url.Values
}

// ResponseBody implements BodyProvider: the items array (a MarshalJSON
// result would be re-validated and compacted).
func (p *ArrayPage[T]) ResponseBody() any {
	if p.Items == nil {
		return []T{}
	}
	return p.Items
}

// OpenAPIBody documents the body as an array of T.
func (p *ArrayPage[T]) OpenAPIBody() any { return new([]T) }

// OpenAPIHeaders documents the pagination headers.
func (p *ArrayPage[T]) OpenAPIHeaders() any { return new(pageHeaders) }

// ResponseHeaders implements HeaderSetter.
func (p *ArrayPage[T]) ResponseHeaders() map[string]string {
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
