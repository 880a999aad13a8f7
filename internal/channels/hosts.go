package channels

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// EnvAllowedHosts names the operator's allow-list of channel hosts.
const EnvAllowedHosts = "CHANNEL_ALLOWED_HOSTS"

// builtinHosts are the hosts each kind may send to (https, port 443):
// Slack's incoming webhooks, Teams' workflow (Power Automate) and legacy
// connector webhooks, PagerDuty's Events API v2 (US and EU).
var builtinHosts = map[string][]string{
	KindSlack:     {"hooks.slack.com"},
	KindTeams:     {"*.logic.azure.com", "*.powerplatform.com", "*.webhook.office.com"},
	KindPagerDuty: {"events.pagerduty.com", "events.eu.pagerduty.com"},
}

// hostPattern is one allow-list entry: a host or, with suffix, every
// host under it; port "" means the scheme's default port.
type hostPattern struct {
	host   string
	suffix bool
	port   string
}

func (p hostPattern) String() string {
	s := p.host
	if p.suffix {
		s = "*." + s
	}
	if p.port != "" {
		s += ":" + p.port
	}
	return s
}

// AllowList is where channels may send. The zero value (or nil) is the
// built-in list of each kind, https only; an operator's list
// (CHANNEL_ALLOWED_HOSTS) replaces every kind's list and admits http too
// (tests and internal relays).
type AllowList struct {
	override []hostPattern
}

// ParseAllowedHosts reads CHANNEL_ALLOWED_HOSTS: comma-separated
// host[:port] entries, each optionally *.suffix. Empty keeps the built-in
// lists.
func ParseAllowedHosts(s string) (*AllowList, error) {
	a := &AllowList{}
	for _, raw := range strings.Split(s, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		p, err := parsePattern(raw)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", raw, err)
		}
		a.override = append(a.override, p)
	}
	return a, nil
}

func parsePattern(raw string) (hostPattern, error) {
	var p hostPattern
	host := strings.ToLower(raw)
	if h, port, err := net.SplitHostPort(host); err == nil {
		host, p.port = h, port
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		host, p.suffix = rest, true
	}
	if !hostChars(host) || (p.port != "" && !digits(p.port)) {
		return p, errors.New("want host[:port] or *.suffix[:port]")
	}
	p.host = host
	return p, nil
}

// hostChars reports whether s is a host name or an IP address: letters,
// digits, dots, hyphens and (IPv6) colons, at least one.
func hostChars(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':') {
			return false
		}
	}
	return s != ""
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func mustPatterns(list []string) []hostPattern {
	out := make([]hostPattern, len(list))
	for i, s := range list {
		p, err := parsePattern(s)
		if err != nil {
			panic(err)
		}
		out[i] = p
	}
	return out
}

// patterns returns the entries that apply to kind, and whether plain
// http is admitted.
func (a *AllowList) patterns(kind string) ([]hostPattern, bool) {
	if a != nil && len(a.override) > 0 {
		return a.override, true
	}
	return mustPatterns(builtinHosts[kind]), false
}

// Check reports why kind may not send to rawURL, or nil when it may.
func (a *AllowList) Check(kind, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return errors.New("must be an absolute https URL")
	}
	pats, plainHTTP := a.patterns(kind)
	if u.Scheme == "http" && !plainHTTP {
		return errors.New("must be an https URL")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	defaultPort := "443"
	if u.Scheme == "http" {
		defaultPort = "80"
	}
	for _, p := range pats {
		if p.matches(host, port, defaultPort) {
			return nil
		}
	}
	names := make([]string, len(pats))
	for i, p := range pats {
		names[i] = p.String()
	}
	return fmt.Errorf("host %s is not a %s host (allowed: %s)", u.Host, kindTitles[kind], strings.Join(names, ", "))
}

func (p hostPattern) matches(host, port, defaultPort string) bool {
	if p.port == "" {
		if port != "" && port != defaultPort {
			return false
		}
	} else if port != p.port && !(port == "" && p.port == defaultPort) {
		return false
	}
	if p.suffix {
		return strings.HasSuffix(host, "."+p.host)
	}
	return host == p.host
}
