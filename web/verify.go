package web

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/notify"
)

type verifyData struct {
	Token   string
	Address *notify.Address
}

// webVerifyPage is where the verification mail links. It only shows a
// button: mail scanners and link previews follow links, so a GET never
// verifies.
func (h *Dashboard) webVerifyPage(c *fiber.Ctx) error {
	token := c.Query("token")
	if token == "" || len(token) > 128 {
		return h.render(c, http.StatusBadRequest, "verify", "Verify a notification address", verifyData{},
			"this link has no valid verification token")
	}
	return h.render(c, http.StatusOK, "verify", "Verify a notification address", verifyData{Token: token}, "")
}

// webVerify posts the token to the verify endpoint's own function, under
// the same per-IP budget as the API route and the sign-in forms' CSRF
// double-submit.
func (h *Dashboard) webVerify(c *fiber.Ctx) error {
	const title = "Verify a notification address"
	token := c.FormValue("token")
	if err := h.checkPreCSRF(c); err != nil {
		return h.render(c, http.StatusForbidden, "verify", title, verifyData{Token: token}, errCSRF.Detail)
	}
	if err := h.api.ChargeClientIP(c); err != nil {
		status, msg := h.problemText(c, err)
		return h.render(c, status, "verify", title, verifyData{Token: token}, msg)
	}
	a, err := h.ops.VerifyNotificationAddress.Call(c.UserContext(), api.Caller{},
		&api.VerifyNotificationAddressRequest{Token: token})
	var e *api.Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return h.render(c, http.StatusNotFound, "verify", title, verifyData{},
			"this verification link is unknown, already used or expired (links work once, for 48 hours)")
	}
	if err != nil {
		status, msg := h.problemText(c, err)
		return h.render(c, status, "verify", title, verifyData{Token: token}, msg)
	}
	return h.render(c, http.StatusOK, "verify", "Address verified", verifyData{Address: a}, "")
}
