package web

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/api"
)

// webPage is what every template gets.
type webPage struct {
	Title   string
	Nav     string
	Session *webSession
	CSRF    string
	Notice  string
	Problem string
	Data    any
}

func (h *Dashboard) render(c *fiber.Ctx, status int, name, title string, data any, problem string) error {
	p := webPage{Title: title, Nav: name, Data: data, Problem: problem}
	if ws, ok := c.Locals(webSessionKey).(*webSession); ok {
		p.Session, p.CSRF = ws, ws.CSRF
	} else {
		p.CSRF = h.preCSRF(c)
	}
	if f := c.Cookies(flashCookie); f != "" {
		if kind, msg, ok := strings.Cut(f, ":"); ok {
			if m, err := url.QueryUnescape(msg); err == nil {
				if kind == "err" {
					if p.Problem == "" {
						p.Problem = m
					}
				} else {
					p.Notice = m
				}
			}
		}
		h.clearCookie(c, flashCookie)
	}
	t, ok := h.pages[name]
	if !ok {
		return errors.New("web: no template " + name)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Status(status).Send(buf.Bytes())
}

// problemText is what the page shows of an error: an API error's detail and
// field messages; for anything else (a 5xx) a fixed text with the request id,
// the cause going to the log only.
func (h *Dashboard) problemText(c *fiber.Ctx, err error) (int, string) {
	var e *api.Error
	if errors.As(err, &e) && e.Status < 500 {
		// The detail often is the first field's message already: each
		// message is said once.
		msg := e.Detail
		for _, f := range e.Fields {
			if line := f.Field + ": " + f.Message; !strings.Contains(msg, line) {
				msg += "; " + line
			}
		}
		return e.Status, msg
	}
	if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable {
		return e.Status, e.Detail
	}
	if e := h.api.DatabaseOutage(c, err); e != nil {
		// The database is down or frozen: a 503 the browser may retry,
		// logged once by the outage, not per page.
		for k, v := range e.Headers {
			c.Set(k, v)
		}
		return e.Status, e.Detail
	}
	h.deps.Logger.ErrorContext(c.UserContext(), "dashboard action failed", slog.String("request_id", api.RequestID(c)), slog.Any("error", err))
	return http.StatusInternalServerError, "something went wrong on our side (request " + api.RequestID(c) + "); try again"
}

// done ends an action: back to the page at to, with its outcome shown once.
func (h *Dashboard) done(c *fiber.Ctx, to string, err error, notice string) error {
	v := "ok:" + url.QueryEscape(notice)
	if err != nil {
		_, msg := h.problemText(c, err)
		v = "err:" + url.QueryEscape(msg)
	}
	if len(v) > 1500 {
		v = v[:1500]
	}
	h.setCookie(c, flashCookie, v, time.Time{})
	return c.Redirect(localRedirect(to), http.StatusSeeOther)
}

// pageError renders a page that could not be built (a 404 domain, ...).
func (h *Dashboard) pageError(c *fiber.Ctx, err error) error {
	status, msg := h.problemText(c, err)
	return h.render(c, status, "error", "Problem", nil, msg)
}
