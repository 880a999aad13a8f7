package web

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/api"
)

// sameOrigin refuses requests a browser marks as coming from another site:
// Sec-Fetch-Site other than same-origin, or an Origin other than ours.
// Clients that send neither (curl) rely on the token alone.
func (h *Dashboard) sameOrigin(c *fiber.Ctx) bool {
	if site := c.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" {
		return true
	}
	if strings.EqualFold(origin, c.Protocol()+"://"+c.Hostname()) {
		return true
	}
	if base := strings.TrimRight(h.deps.PublicBaseURL, "/"); base != "" {
		if u, err := url.Parse(base); err == nil && strings.EqualFold(origin, u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

func tokensEqual(a, b string) bool {
	return a != "" && len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

var errCSRF = &api.Error{Status: http.StatusForbidden, Detail: "cross-site request refused: reload the page and try again"}

// webCheckCSRF guards every state-changing dashboard request: the form field
// csrf (or the X-CSRF-Token header of a script's request) must be the
// session's token, and the request must come from our own origin.
func (h *Dashboard) webCheckCSRF(c *fiber.Ctx) error {
	ws := c.Locals(webSessionKey).(*webSession)
	got := c.Get("X-CSRF-Token")
	if got == "" {
		got = c.FormValue("csrf")
	}
	if !h.sameOrigin(c) || !tokensEqual(got, ws.CSRF) {
		return errCSRF
	}
	return c.Next()
}

// preCSRF returns the double-submit token of the sign-in forms, setting its
// cookie when the browser has none.
func (h *Dashboard) preCSRF(c *fiber.Ctx) string {
	if t := c.Cookies(preCSRFCookie); len(t) == 43 {
		return strings.Clone(t)
	}
	t := newToken()
	h.setCookie(c, preCSRFCookie, t, time.Time{})
	return t
}

func (h *Dashboard) checkPreCSRF(c *fiber.Ctx) error {
	if !h.sameOrigin(c) || !tokensEqual(c.FormValue("csrf"), c.Cookies(preCSRFCookie)) {
		return errCSRF
	}
	return nil
}
