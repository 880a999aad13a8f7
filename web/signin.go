package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/ulule/limiter/v3"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/signin"
)

type signInData struct {
	Email string
	Next  string
}

// maxRedirectLen bounds a redirect target; a longer one becomes "/".
const maxRedirectLen = 2048

// localRedirect is the only gate of the dashboard's redirect targets (the
// sign-in's next, an action's way back): raw is kept when it is a path on
// this site, else "/". Browsers drop tabs and newlines from a URL, read a
// backslash as a slash and "//host" as another site, so only printable
// ASCII other than space and backslash is accepted (anything else must come
// percent-encoded), the target must parse as a URL with neither scheme nor
// host, and its path, decoded, must start with exactly one slash and hold
// no control character, whitespace or backslash either.
func localRedirect(raw string) string {
	if raw == "" || len(raw) > maxRedirectLen || raw[0] != '/' {
		return "/"
	}
	for i := 0; i < len(raw); i++ {
		if b := raw[i]; b <= ' ' || b >= 0x7f || b == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	for _, r := range u.Path {
		if r <= ' ' || r == 0x7f || r == '\\' || r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return "/"
		}
	}
	return raw
}

func (h *Dashboard) webSignInPage(c *fiber.Ctx) error {
	if ws, err := h.session(c); err == nil && ws != nil && ws.Suspended == "" {
		return c.Redirect(localRedirect(c.Query("next")), http.StatusSeeOther)
	}
	return h.render(c, http.StatusOK, "signin", "Sign in", signInData{Next: localRedirect(c.Query("next"))}, "")
}

func (h *Dashboard) webSignUpPage(c *fiber.Ctx) error {
	return h.render(c, http.StatusOK, "signup", "Create an account", signInData{}, "")
}

// throttled says whether key has used up its failed sign-ins, and when it
// may try again.
// throttledRequest charges one request to key and reports whether it is
// over the limit, with the seconds until the window resets. A store that
// cannot be reached does not lock people out.
func throttledRequest(ctx context.Context, lim *limiter.Limiter, key string) (bool, int64) {
	lc, err := lim.Get(ctx, key)
	if err != nil || !lc.Reached {
		return false, 0
	}
	return true, max(lc.Reset-time.Now().Unix(), 1)
}

func throttled(ctx context.Context, lim *limiter.Limiter, key string) (bool, int64) {
	lc, err := lim.Peek(ctx, key)
	if err != nil {
		return false, 0
	}
	if lc.Reached || lc.Remaining <= 0 {
		return true, max(1, lc.Reset-time.Now().Unix())
	}
	return false, 0
}

func (h *Dashboard) webSignIn(c *fiber.Ctx) error {
	if err := h.checkPreCSRF(c); err != nil {
		return h.render(c, http.StatusForbidden, "signin", "Sign in", signInData{}, errCSRF.Detail)
	}
	ctx := c.UserContext()
	email := strings.ToLower(strings.TrimSpace(c.FormValue("email")))
	form := signInData{Email: email, Next: localRedirect(c.FormValue("next"))}
	ipKey := "signin-ip:" + c.IP()
	if limited, wait := throttled(ctx, h.ipFails, ipKey); limited {
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(wait, 10))
		return h.render(c, http.StatusTooManyRequests, "signin", "Sign in", form,
			"too many failed sign-ins; try again in "+strconv.FormatInt((wait+59)/60, 10)+" minutes")
	}
	// The account's own budget (internal/signin) is checked inside, with
	// this browser's device cookie: token.go's checkPassword.
	in, err := h.api.CheckPassword(ctx, email, c.FormValue("password"), strings.Clone(c.Cookies(api.DeviceCookie)), true)
	if err != nil {
		var e *api.Error
		if errors.As(err, &e) && e.Status == http.StatusUnauthorized {
			_, _ = h.ipFails.Get(ctx, ipKey)
		}
		if errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
			for k, v := range e.Headers {
				c.Set(k, v)
			}
		}
		status, msg := h.problemText(c, err)
		return h.render(c, status, "signin", "Sign in", form, msg)
	}
	if in.Device != "" {
		h.setCookie(c, api.DeviceCookie, in.Device, h.deps.Now().Add(signin.DeviceTTL))
	}
	if err := h.startSession(c, in.Account, in.Email, false); err != nil {
		return err
	}
	return c.Redirect(form.Next, http.StatusSeeOther)
}

type signUpData struct {
	Email string
	Key   *api.NewAPIKey
}

func (h *Dashboard) webSignUp(c *fiber.Ctx) error {
	if err := h.checkPreCSRF(c); err != nil {
		return h.render(c, http.StatusForbidden, "signup", "Create an account", signUpData{}, errCSRF.Detail)
	}
	// Account creation costs the client IP's budget, as POST /api/accounts does.
	if err := h.api.ChargeClientIP(c); err != nil {
		status, msg := h.problemText(c, err)
		return h.render(c, status, "signup", "Create an account", signUpData{}, msg)
	}
	ctx := c.UserContext()
	req := &api.CreateAccountRequest{Email: c.FormValue("email"), Password: c.FormValue("password")}
	resp, err := h.ops.CreateAccount.Call(ctx, api.Caller{}, req)
	if err != nil {
		status, msg := h.problemText(c, err)
		return h.render(c, status, "signup", "Create an account", signUpData{Email: req.Email}, msg)
	}
	if err := h.startSession(c, resp.Account.ID, resp.Account.Email, resp.Account.IsAdmin); err != nil {
		return err
	}
	// The account's first key is shown here once, like the API's answer.
	return h.render(c, http.StatusCreated, "welcome", "Welcome", signUpData{Email: resp.Account.Email, Key: &resp.APIKey}, "")
}

func (h *Dashboard) webSignOut(c *fiber.Ctx) error {
	if token := c.Cookies(sessionCookie); token != "" {
		if _, err := h.q.WebSessionDelete(c.UserContext(), h.deps.DB, tokenHash(token)); err != nil {
			return err
		}
	}
	h.clearCookie(c, sessionCookie)
	return c.Redirect("/signin", http.StatusSeeOther)
}
