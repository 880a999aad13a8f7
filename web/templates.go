package web

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/events"
)

// parsePages parses each page template with the layout.
func parsePages() map[string]*template.Template {
	names, err := fs.Glob(Files, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		out[base] = template.Must(template.New(base).Funcs(templateFuncs).ParseFS(Files, "templates/layout.html", n))
	}
	return out
}

var templateFuncs = template.FuncMap{
	// title and summary are an event type's words and what one event of it
	// says (internal/events/describe.go), as alert mail has them.
	"title": events.Title,
	"summary": func(typ string, payload api.Payload) string {
		return events.Summary(typ, payload)
	},
	// causes are an alert's likely causes (internal/events/causes.go).
	"causes": func(payload api.Payload) []events.Cause { return events.CausesOf(payload) },
	"when":   func(v any) template.HTML { return when(v, false) },
	// whenSec is when to the second (attempts, retries).
	"whenSec": func(v any) template.HTML { return when(v, true) },
	"str": func(v any) string {
		switch x := v.(type) {
		case *string:
			if x == nil {
				return "—"
			}
			return *x
		case *int:
			if x == nil {
				return "—"
			}
			return strconv.Itoa(*x)
		case *int32:
			if x == nil {
				return "—"
			}
			return strconv.Itoa(int(*x))
		case *int64:
			if x == nil {
				return "—"
			}
			return strconv.FormatInt(*x, 10)
		case *float64:
			if x == nil {
				return "—"
			}
			return strconv.FormatFloat(*x, 'f', 1, 64)
		}
		return fmt.Sprint(v)
	},
	"join":  strings.Join,
	"deref": func(b *bool) bool { return b != nil && *b },
	"pct":   func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
	// plural writes "1 receiver", "2 receivers".
	"plural": func(n int64, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.FormatInt(n, 10) + " " + many
	},
	// originText says why a blocklist target is watched.
	"originText": func(origin string) string {
		switch origin {
		case "report":
			return "source in reports"
		case "sender":
			return "known sender, failing DMARC"
		case "pinned":
			return "pinned"
		case "domain":
			return "the domain"
		case "auth_domain":
			return "return path or DKIM domain"
		}
		return origin
	},
	"pretty": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return ""
		}
		return string(b)
	},
	"scoreClass": func(p *int) string {
		switch {
		case p == nil:
			return "unknown"
		case *p >= domains.HealthyFrom:
			return "good"
		case *p >= domains.AtRiskBelow:
			return "fair"
		}
		return "bad"
	},
	"checkNames": dnscheck.Names,
	"checkTitle": dnscheck.Title,
	"groupTitle": func(name string) string {
		if g, ok := events.LookupGroup(name); ok && g.Title != "" {
			return g.Title
		}
		return name
	},
	"index0": func(m api.CheckMap, k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return "—"
	},
}

// callerOf is the signed-in account of the request as the operations'
// caller.
func callerOf(c *fiber.Ctx) api.Caller {
	ws := c.Locals(webSessionKey).(*webSession)
	return api.Caller{AccountID: ws.Account, KeyIdentifier: DashboardKeyIdentifier, IsAdmin: ws.IsAdmin}
}

// when renders a time for the viewer's zone: RFC 3339 in datetime (the
// page's script formats it with Intl), UTC as the text until then.
func when(v any, seconds bool) template.HTML {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x == nil {
			return "—"
		}
		t = *x
	default:
		return ""
	}
	u := t.UTC()
	if seconds {
		return template.HTML(`<time datetime="` + u.Format(time.RFC3339) + `" data-seconds>` + template.HTMLEscapeString(u.Format("2006-01-02 15:04:05 UTC")) + `</time>`)
	}
	return template.HTML(`<time datetime="` + u.Format(time.RFC3339) + `">` + template.HTMLEscapeString(u.Format("2006-01-02 15:04 UTC")) + `</time>`)
}
