// Package edge holds the rules an HTTP request meets before any handler
// reads it, shared by every server of mailwatch (the API with its
// dashboard, and River UI).
//
// Content codings (RFC 9110 section 8.4): a request body is taken as it is
// sent, never decoded. Go's net/http leaves bodies alone, but Fiber's
// Ctx.Body() decodes gzip, deflate and br, chained as listed, through
// fasthttp with no bound on the output, so a 2 KB body can become gigabytes
// in memory while BODY_LIMIT_BYTES only bounds the bytes on the wire. No
// sender mailwatch serves (browsers, API clients, the ESPs, Stripe, Twilio,
// identity providers, TLS-RPT reporters, which gzip the report itself as
// application/tlsrpt+gzip) compresses request bodies, so a body with any
// content coding but identity is refused (415, with Accept-Encoding:
// identity as RFC 9110 section 15.5.16 asks), which costs nothing, rather
// than decoded under a cap.
//
// Cross-site requests: a browser that holds credentials for a server
// (River UI's basic auth) sends them with any page's requests, so a
// state-changing request must come from the server's own pages, as
// Sec-Fetch-Site or Origin say (see SameOrigin).
package edge

import (
	"errors"
	"mime"
	"net/url"
	"strings"
)

// AcceptEncoding is the Accept-Encoding of a refusal: the only content
// coding a request body may have.
const AcceptEncoding = "identity"

// ErrContentCoding is a request body with a content coding other than
// identity; its text is the refusal's detail.
var ErrContentCoding = errors.New("request bodies are accepted uncompressed only: send the body without " +
	"Content-Encoding (or with Content-Encoding: identity); gzip, deflate, br and any other coding are refused")

// CheckContentEncoding returns ErrContentCoding when any of the values of a
// request's Content-Encoding header fields lists a coding other than
// identity (matched without case); hasBody is false for a request without a
// body, which has nothing to decode and passes.
func CheckContentEncoding(hasBody bool, values ...string) error {
	if !hasBody {
		return nil
	}
	for _, v := range values {
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return ErrContentCoding
			}
		}
	}
	return nil
}

// ErrCrossSite is a state-changing request a browser made for another
// site's page.
var ErrCrossSite = errors.New("cross-site request refused: actions are accepted only from this server's own pages " +
	"(Sec-Fetch-Site must be same-origin, Origin this server's)")

// SameOrigin decides whether a state-changing request comes from host's own
// pages (host as the request's Host header names it). Sec-Fetch-Site, which
// a browser sets and no page can forge, decides when present: same-origin
// and none (the user's own navigation) pass, same-site and cross-site do
// not. Without it (an older browser), Origin must name host (any scheme,
// since a TLS proxy in front changes it); "null" never does. A request with
// neither comes from no browser (curl, a script) and cannot have been sent
// on a user's behalf by another page: it passes.
func SameOrigin(secFetchSite, origin, host string) error {
	if secFetchSite != "" {
		if secFetchSite == "same-origin" || secFetchSite == "none" {
			return nil
		}
		return ErrCrossSite
	}
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, host) {
		return ErrCrossSite
	}
	return nil
}

// ErrNotJSON is a state-changing request whose body is not declared JSON.
var ErrNotJSON = errors.New("the body must be JSON: send it with Content-Type: application/json")

// CheckJSONBody refuses a body a browser could have sent from another site
// without a CORS preflight: it must be declared application/json (or a
// +json type), which a cross-site page cannot send without a preflight the
// server never grants. text/plain, what fetch() sets for a string body, is
// accepted only with Sec-Fetch-Site: same-origin, which the browser sets for
// the server's own pages (River UI's frontend posts its JSON that way).
// Forms (urlencoded, multipart) and anything else are refused.
func CheckJSONBody(hasBody bool, contentType, secFetchSite string) error {
	if !hasBody {
		return nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ErrNotJSON
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return nil
	case mt == "text/plain" && secFetchSite == "same-origin":
		return nil
	}
	return ErrNotJSON
}
