package weekly

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strconv"
	"strings"
	texttemplate "text/template"

	"github.com/mailwatch/mailwatch/internal/reports"
)

// view is a Report in words: what both parts of the mail say.
type view struct {
	Range, Subject, Link string
	NoReports, Quiet     bool
	Rows                 []row
	Total                row
	More                 int
	Domains              []domainView
}

// row is one line of the overall table.
type row struct {
	Name, Messages, PassRate, Trend, NewSources, OpenAlerts string
}

type domainView struct {
	Name, Link string
	// Lines are the section's sentences, each "Label: text".
	Lines []line
}

type line struct{ Label, Text string }

// Message is the rendered digest.
type Message struct {
	Subject, Text, HTML string
}

// Render words the report as a mail's subject, text and HTML parts.
func Render(r *Report) (Message, error) {
	v := words(r)
	var tb, hb bytes.Buffer
	if err := textTmpl.Execute(&tb, v); err != nil {
		return Message{}, fmt.Errorf("error rendering the text part: %w", err)
	}
	if err := htmlTmpl.Execute(&hb, v); err != nil {
		return Message{}, fmt.Errorf("error rendering the HTML part: %w", err)
	}
	return Message{Subject: v.Subject, Text: tb.String(), HTML: hb.String()}, nil
}

func words(r *Report) view {
	end := r.Week.AddDate(0, 0, 6)
	v := view{Range: r.Week.Format("Mon Jan 2") + " to " + end.Format("Mon Jan 2, 2006"), Link: r.Link, More: r.More,
		NoReports: r.Totals.Reporting == 0, Quiet: r.Totals.NewSources == 0 && r.Totals.OpenAlerts == 0}
	t := r.Totals
	v.Subject = fmt.Sprintf("[mailwatch] Week of %s: ", r.Week.Format("Jan 2"))
	switch {
	case v.NoReports:
		v.Subject += "no DMARC reports arrived"
	default:
		rate, _ := Rate(t.Passing, t.Messages)
		v.Subject += fmt.Sprintf("%s messages reported, %s passing DMARC", count(t.Messages), percent(rate))
	}
	if t.OpenAlerts > 0 {
		v.Subject += fmt.Sprintf(", %d open %s", t.OpenAlerts, plural(t.OpenAlerts, "alert", "alerts"))
	}
	for _, d := range r.Domains {
		v.Rows = append(v.Rows, tableRow(d.Name, d.Messages, d.Passing, d.PrevMessages, d.PrevPassing, len(d.NewSources), d.OpenAlerts))
		v.Domains = append(v.Domains, domainWords(d, r.Link))
	}
	v.Total = tableRow("All listed domains", t.Messages, t.Passing, t.PrevMessages, t.PrevPassing, t.NewSources, t.OpenAlerts)
	return v
}

func tableRow(name string, messages, passing, prevMessages, prevPassing int64, newSources int, alerts int64) row {
	r := row{Name: name, Messages: count(messages), PassRate: "—", Trend: trendWord(Trend(passing, messages, prevPassing, prevMessages)),
		NewSources: strconv.Itoa(newSources), OpenAlerts: strconv.FormatInt(alerts, 10)}
	if rate, ok := Rate(passing, messages); ok {
		r.PassRate = percent(rate)
	}
	return r
}

func trendWord(t string) string {
	switch t {
	case "up":
		return "up"
	case "down":
		return "down"
	case "steady":
		return "steady"
	case "new":
		return "first reports"
	}
	return "—"
}

func domainWords(d Domain, link string) domainView {
	v := domainView{Name: d.Name, Link: link + "/domains/" + url.PathEscape(d.Name)}
	add := func(label, format string, args ...any) {
		v.Lines = append(v.Lines, line{label, fmt.Sprintf(format, args...)})
	}
	if d.Messages == 0 {
		before := ""
		if d.PrevMessages > 0 {
			before = fmt.Sprintf(" (%s messages the week before)", count(d.PrevMessages))
		}
		add("DMARC", "no aggregate reports this week%s. Reporters send them daily once the DMARC record's rua names mailwatch's address.", before)
	} else {
		rate, _ := Rate(d.Passing, d.Messages)
		s := fmt.Sprintf("%s messages, %s passing", count(d.Messages), percent(rate))
		if prev, ok := Rate(d.PrevPassing, d.PrevMessages); ok {
			s += fmt.Sprintf(" (%s the week before: %s)", percent(prev), trendWord(Trend(d.Passing, d.Messages, d.PrevPassing, d.PrevMessages)))
		} else {
			s += " (no reports the week before)"
		}
		add("DMARC", "%s.", s)
		add("Sources", "compliant %s, forwarded %s, non-compliant known senders %s, threat or unknown %s.",
			count(d.Compliant), count(d.Forwarded), count(d.NonCompliant), count(d.ThreatUnknown))
	}
	if len(d.NewSources) > 0 {
		var names []string
		for _, s := range d.NewSources[:min(len(d.NewSources), newSourcesListed)] {
			n := s.IP
			if s.Name != "" {
				n += " (" + s.Name + ")"
			}
			names = append(names, fmt.Sprintf("%s, %s failing of %s", n, count(s.Failed), count(s.Messages)))
		}
		more := ""
		if extra := len(d.NewSources) - newSourcesListed; extra > 0 {
			more = fmt.Sprintf("; and %d more", extra)
		}
		add("New sources", "%s%s.", strings.Join(names, "; "), more)
	}
	if d.Readiness != nil {
		add("Enforcement", "%s.", readiness(d.Readiness))
	}
	if d.OpenAlerts > 0 {
		add("Open alerts", "%d, waiting for acknowledgement.", d.OpenAlerts)
	}
	if d.ListedShare > 0 {
		add("Blocklists", "%s of the last 7 days' mail came from listed IPs.", percent(d.ListedShare))
	} else {
		add("Blocklists", "no listed IP sent the last 7 days' mail.")
	}
	switch {
	case len(d.Certs) > 0:
		var cs []string
		for _, c := range d.Certs {
			cs = append(cs, fmt.Sprintf("%s expires in %d %s", c.Host, c.DaysLeft, plural(int64(c.DaysLeft), "day", "days")))
		}
		add("MX certificates", "%s.", strings.Join(cs, "; "))
	case d.Probed:
		add("MX certificates", "none expires within %d days.", certWarnDays)
	}
	return v
}

func readiness(r *reports.Readiness) string {
	policy := r.CurrentPolicy
	if policy == "" {
		policy = "no DMARC record"
	} else {
		policy = "p=" + policy
	}
	switch {
	case r.NextPolicy == "":
		return policy + ", the last step"
	case r.Ready:
		return fmt.Sprintf("%s; ready for p=%s", policy, r.NextPolicy)
	case len(r.Blockers) > 0:
		return fmt.Sprintf("%s; not ready for p=%s: %s", policy, r.NextPolicy, r.Blockers[0])
	}
	return fmt.Sprintf("%s; not ready for p=%s", policy, r.NextPolicy)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// count writes n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// percent writes a share as a percentage with one decimal, without a
// trailing ".0".
func percent(share float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(share*100, 'f', 1, 64), ".0") + "%"
}

var textTmpl = texttemplate.Must(texttemplate.New("weekly").Parse(`mailwatch weekly digest, {{.Range}} (UTC)
{{if .NoReports}}
No DMARC aggregate reports arrived this week for any listed domain.
{{else if .Quiet}}
A quiet week: no new sources and no open alerts.
{{end}}
{{printf "%-32s %12s %9s %-13s %11s %11s" "Domain" "Messages" "Pass rate" "Trend" "New sources" "Open alerts"}}
{{range .Rows}}{{printf "%-32s %12s %9s %-13s %11s %11s" .Name .Messages .PassRate .Trend .NewSources .OpenAlerts}}
{{end}}{{with .Total}}{{printf "%-32s %12s %9s %-13s %11s %11s" .Name .Messages .PassRate .Trend .NewSources .OpenAlerts}}{{end}}
{{if .More}}...and {{.More}} more domains, not listed.
{{end}}{{range .Domains}}
{{.Name}}
{{range .Lines}}  {{.Label}}: {{.Text}}
{{end}}  {{.Link}}
{{end}}
Choose what this digest covers: {{.Link}}/settings
`))

var htmlTmpl = htmltemplate.Must(htmltemplate.New("weekly").Parse(`<!DOCTYPE html>
<html><body style="font-family:sans-serif;color:#1f2328">
<h2>mailwatch weekly digest, {{.Range}} (UTC)</h2>
{{- if .NoReports}}
<p><strong>No DMARC aggregate reports arrived this week for any listed domain.</strong></p>
{{- else if .Quiet}}
<p>A quiet week: no new sources and no open alerts.</p>
{{- end}}
<table cellpadding="4" style="border-collapse:collapse">
<tr><th align="left">Domain</th><th align="right">Messages</th><th align="right">Pass rate</th><th align="left">Trend</th><th align="right">New sources</th><th align="right">Open alerts</th></tr>
{{- range .Rows}}
<tr><td>{{.Name}}</td><td align="right">{{.Messages}}</td><td align="right">{{.PassRate}}</td><td>{{.Trend}}</td><td align="right">{{.NewSources}}</td><td align="right">{{.OpenAlerts}}</td></tr>
{{- end}}
{{- with .Total}}
<tr><th align="left">{{.Name}}</th><th align="right">{{.Messages}}</th><th align="right">{{.PassRate}}</th><th align="left">{{.Trend}}</th><th align="right">{{.NewSources}}</th><th align="right">{{.OpenAlerts}}</th></tr>
{{- end}}
</table>
{{- if .More}}
<p>...and {{.More}} more domains, not listed.</p>
{{- end}}
{{- range .Domains}}
<h3><a href="{{.Link}}">{{.Name}}</a></h3>
<ul>
{{- range .Lines}}
<li><strong>{{.Label}}:</strong> {{.Text}}</li>
{{- end}}
</ul>
{{- end}}
<p><a href="{{.Link}}/settings">Choose what this digest covers</a></p>
</body></html>
`))
