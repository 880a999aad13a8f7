package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"net/url"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Mailer composes notification mail and sends it through the relay.
type Mailer struct {
	// Relay is nil when SMTP_RELAY_URL is unset: Send returns ErrNoRelay.
	Relay *Relay
	// From is the From address (NOTIFY_FROM).
	From string
	// BaseURL is the dashboard's base URL for links, without a trailing
	// slash (PUBLIC_BASE_URL, or http://localhost:<port of LISTEN_ADDR>).
	BaseURL string
}

// Message is one composed mail.
type Message struct {
	To      []string
	Subject string
	Text    string
	HTML    string
}

// Send composes m and sends it.
func (ml *Mailer) Send(ctx context.Context, m Message, now time.Time) error {
	if ml == nil || ml.Relay == nil {
		return ErrNoRelay
	}
	raw, err := ml.Build(m, now)
	if err != nil {
		return err
	}
	from, err := mail.ParseAddress(ml.From)
	if err != nil {
		return fmt.Errorf("NOTIFY_FROM is not an address: %w", err)
	}
	return ml.Relay.Send(ctx, from.Address, m.To, raw)
}

// Build renders m as a multipart/alternative message (text/plain then
// text/html, both UTF-8 quoted-printable; RFC 2046 5.1.4: the preferred,
// richer part last).
func (ml *Mailer) Build(m Message, now time.Time) ([]byte, error) {
	from, err := mail.ParseAddress(ml.From)
	if err != nil {
		return nil, fmt.Errorf("NOTIFY_FROM is not an address: %w", err)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	var id [12]byte
	_, _ = rand.Read(id[:])
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	to := make([]string, len(m.To))
	for i, a := range m.To {
		to[i] = (&mail.Address{Address: a}).String()
	}
	h := []struct{ k, v string }{
		{"From", from.String()},
		{"To", strings.Join(to, ", ")},
		{"Subject", mime.QEncoding.Encode("utf-8", m.Subject)},
		{"Date", now.UTC().Format(time.RFC1123Z)},
		{"Message-ID", "<" + hex.EncodeToString(id[:]) + "@" + domain + ">"},
		{"MIME-Version", "1.0"},
		// RFC 3834: machine-generated, so autoresponders stay quiet.
		{"Auto-Submitted", "auto-generated"},
		{"Content-Type", `multipart/alternative; boundary="` + mw.Boundary() + `"`},
	}
	var head bytes.Buffer
	for _, kv := range h {
		fmt.Fprintf(&head, "%s: %s\r\n", kv.k, kv.v)
	}
	head.WriteString("\r\n")
	for _, part := range []struct{ ctype, body string }{{"text/plain; charset=utf-8", m.Text}, {"text/html; charset=utf-8", m.HTML}} {
		w, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.ctype},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, err
		}
		qp := quotedprintable.NewWriter(w)
		if _, err := qp.Write([]byte(strings.ReplaceAll(part.body, "\n", "\r\n"))); err != nil {
			return nil, err
		}
		if err := qp.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	return append(head.Bytes(), buf.Bytes()...), nil
}

// Link is the dashboard URL of path (with a leading slash).
func (ml *Mailer) Link(path string) string { return ml.BaseURL + path }

// maxPayloadInMail caps the payload shown in an alert mail.
const maxPayloadInMail = 4 << 10

type alertData struct {
	Type, Title, Summary, Description, Severity, Domain, Payload, Link string
	At                                                                 string
	// Causes are the event's likely causes, most likely first; HasCauses
	// says whether it looked for some (an empty list: none found).
	Causes    []events.Cause
	HasCauses bool
}

var alertText = texttemplate.Must(texttemplate.New("alert").Parse(`mailwatch alert: {{.Title}}
{{if .Summary}}{{.Summary}}

{{end}}{{.Description}}

Type:     {{.Type}}
Severity: {{.Severity}}
{{- if .Domain}}
Domain:   {{.Domain}}{{end}}
At:       {{.At}}
{{if .HasCauses}}
Likely causes (the domain's signals of the 72 hours before, most likely first):
{{- range .Causes}}
- {{.Title}}: {{.Summary}} ({{.At.Format "2006-01-02 15:04"}} UTC, event {{.EventID}})
{{- else}}
none found: no signal of the domain in the 72 hours before explains it.
{{- end}}
{{end}}
{{.Payload}}

Acknowledge it in the dashboard: {{.Link}}
`))

var alertHTML = htmltemplate.Must(htmltemplate.New("alert").Parse(`<!DOCTYPE html>
<html><body>
<h2>mailwatch alert: {{.Title}}</h2>
{{- if .Summary}}
<p><strong>{{.Summary}}</strong></p>{{end}}
<p>{{.Description}}</p>
<table>
<tr><th align="left">Type</th><td>{{.Type}}</td></tr>
<tr><th align="left">Severity</th><td>{{.Severity}}</td></tr>
{{- if .Domain}}
<tr><th align="left">Domain</th><td>{{.Domain}}</td></tr>{{end}}
<tr><th align="left">At</th><td>{{.At}}</td></tr>
</table>
{{- if .HasCauses}}
<h3>Likely causes</h3>
{{- if .Causes}}
<ol>
{{- range .Causes}}
<li><strong>{{.Title}}</strong>: {{.Summary}} ({{.At.Format "2006-01-02 15:04"}} UTC)</li>
{{- end}}
</ol>
{{- else}}
<p>None found: no signal of the domain in the 72 hours before explains it.</p>
{{- end}}
{{- end}}
<pre>{{.Payload}}</pre>
<p><a href="{{.Link}}">Open the alert in the dashboard</a></p>
</body></html>
`))

// AlertMessage composes the mail of one alert.
func (ml *Mailer) AlertMessage(ev dbsqlc.Event, to []string) (Message, error) {
	t, _ := events.Lookup(ev.EventType)
	payload := prettyPayload(ev.Payload)
	d := alertData{
		Type: ev.EventType, Title: events.Title(ev.EventType), Summary: events.Summary(ev.EventType, ev.Payload), Description: t.Description, Severity: ev.Severity, Payload: payload,
		Link: ml.Link("/alerts?event=" + url.QueryEscape(ev.ID.String())), At: ev.CreatedAt.UTC().Format(time.RFC3339),
	}
	if ev.Domain != nil {
		d.Domain = *ev.Domain
	}
	d.Causes = events.CausesOf(ev.Payload)
	d.HasCauses = ev.Severity == string(events.SeverityCritical) && ev.Domain != nil && events.HasCauses(ev.EventType)
	subject := "[mailwatch] Alert: " + d.Title
	if d.Domain != "" {
		subject += " on " + d.Domain
	}
	return render(to, subject, alertText, alertHTML, d)
}

func prettyPayload(p []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, p, "", "  "); err != nil {
		out.Reset()
		out.Write(p)
	}
	s := out.String()
	if len(s) > maxPayloadInMail {
		s = s[:maxPayloadInMail] + "\n..."
	}
	return s
}

type digestData struct {
	Day    string
	Total  int
	Shown  int
	Events []digestLine
	Link   string
}

type digestLine struct{ At, Title, Summary, Severity, Domain string }

var digestText = texttemplate.Must(texttemplate.New("digest").Parse(`mailwatch daily digest for {{.Day}} (UTC): {{.Total}} event(s)
{{range .Events}}
{{.At}}  {{.Severity}}  {{.Title}}{{if .Summary}}: {{.Summary}}{{else if .Domain}}  {{.Domain}}{{end}}{{end}}
{{if lt .Shown .Total}}
...and {{.Total}} in all; the first {{.Shown}} are listed.
{{end}}
All events: {{.Link}}
`))

var digestHTML = htmltemplate.Must(htmltemplate.New("digest").Parse(`<!DOCTYPE html>
<html><body>
<h2>mailwatch daily digest for {{.Day}} (UTC)</h2>
<p>{{.Total}} event(s).</p>
<table>
<tr><th align="left">At</th><th align="left">Severity</th><th align="left">Event</th><th align="left">What happened</th></tr>
{{- range .Events}}
<tr><td>{{.At}}</td><td>{{.Severity}}</td><td>{{.Title}}</td><td>{{if .Summary}}{{.Summary}}{{else}}{{.Domain}}{{end}}</td></tr>{{end}}
</table>
{{- if lt .Shown .Total}}
<p>The first {{.Shown}} of {{.Total}} are listed.</p>{{end}}
<p><a href="{{.Link}}">All events in the dashboard</a></p>
</body></html>
`))

// DigestMessage composes a day's digest; evs are the events to list and
// total how many there are.
func (ml *Mailer) DigestMessage(day time.Time, evs []dbsqlc.Event, total int, to []string) (Message, error) {
	d := digestData{Day: day.Format(time.DateOnly), Total: total, Shown: len(evs), Link: ml.Link("/events")}
	for _, ev := range evs {
		l := digestLine{At: ev.CreatedAt.UTC().Format("15:04:05"), Title: events.Title(ev.EventType),
			Summary: events.Summary(ev.EventType, ev.Payload), Severity: ev.Severity}
		if ev.Domain != nil {
			l.Domain = *ev.Domain
		}
		d.Events = append(d.Events, l)
	}
	return render(to, fmt.Sprintf("[mailwatch] Daily digest for %s: %d event(s)", d.Day, total), digestText, digestHTML, d)
}

type verifyData struct{ Email, Token, Link, Lifetime string }

// verifyLifetime is VerificationTokenTTL in the mail's words ("48 hours").
var verifyLifetime = fmt.Sprintf("%d hours", int(VerificationTokenTTL/time.Hour))

var verifyText = texttemplate.Must(texttemplate.New("verify").Parse(`Confirm that mailwatch may send alerts and digests to {{.Email}}.

Open this link to confirm (it works once, for {{.Lifetime}}):
{{.Link}}

or send the token to the API:
POST /api/notification-addresses/verify {"token": "{{.Token}}"}

If you did not ask for this, ignore this message.
`))

var verifyHTML = htmltemplate.Must(htmltemplate.New("verify").Parse(`<!DOCTYPE html>
<html><body>
<p>Confirm that mailwatch may send alerts and digests to <b>{{.Email}}</b>.</p>
<p><a href="{{.Link}}">Confirm this address</a> (it works once, for {{.Lifetime}}).</p>
<p>Or send the token to the API: <code>POST /api/notification-addresses/verify</code> with <code>{"token": "{{.Token}}"}</code></p>
<p>If you did not ask for this, ignore this message.</p>
</body></html>
`))

// VerifyMessage composes the verification mail of one address.
func (ml *Mailer) VerifyMessage(email, token string) (Message, error) {
	d := verifyData{Email: email, Token: token, Link: ml.Link("/notifications/verify?token=" + url.QueryEscape(token)),
		Lifetime: verifyLifetime}
	return render([]string{email}, "[mailwatch] Confirm your notification address", verifyText, verifyHTML, d)
}

func render(to []string, subject string, text *texttemplate.Template, html *htmltemplate.Template, data any) (Message, error) {
	var tb, hb bytes.Buffer
	if err := text.Execute(&tb, data); err != nil {
		return Message{}, fmt.Errorf("error rendering text part: %w", err)
	}
	if err := html.Execute(&hb, data); err != nil {
		return Message{}, fmt.Errorf("error rendering HTML part: %w", err)
	}
	return Message{To: to, Subject: subject, Text: tb.String(), HTML: hb.String()}, nil
}

// BaseURL is the dashboard's base URL for links in mail: publicBaseURL
// (PUBLIC_BASE_URL) when set, otherwise http://localhost:<port of
// listenAddr> (LISTEN_ADDR), which is right for `mailwatch dev` only.
func BaseURL(publicBaseURL, listenAddr string) string {
	if publicBaseURL != "" {
		return strings.TrimSuffix(publicBaseURL, "/")
	}
	port := "8080"
	if i := strings.LastIndexByte(listenAddr, ':'); i >= 0 && i < len(listenAddr)-1 {
		port = listenAddr[i+1:]
	}
	return "http://localhost:" + port
}
