package events

import (
	"encoding/json"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/health"
)

// rank orders severities from least to most severe.
func (s Severity) rank() int {
	switch s {
	case SeverityInfo:
		return 1
	case SeverityWarning:
		return 2
	case SeverityCritical:
		return 3
	}
	return 0
}

// SeverityFor is the severity an event of type t with this payload gets
// when its producer asks for requested ("" for none): the type's default,
// or what the producer asked for, raised to what the type's escalation
// rule gives the payload. A rule never lowers an explicit request below
// its own answer, and no producer can emit below it: a score that fell
// to 45 is critical whoever emits it.
func (t Type) SeverityFor(requested Severity, payload []byte) Severity {
	var rule Severity
	if t.escalate != nil {
		rule = t.escalate(payload)
	}
	switch {
	case requested == "" && rule != "":
		return rule
	case requested == "":
		return t.DefaultSeverity
	case rule.rank() > requested.rank():
		return rule
	}
	return requested
}

// escalateHealthScore: a rise is info; a fall is a warning, critical when
// it ends below health.CriticalScore or loses health.CriticalDrop points or
// more (the same rule as health.Compare).
func escalateHealthScore(payload []byte) Severity {
	var p struct {
		Score int `json:"score"`
		Delta int `json:"delta"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	switch {
	case p.Delta > 0:
		return SeverityInfo
	case p.Delta < 0 && (p.Score < health.CriticalScore || -p.Delta >= health.CriticalDrop):
		return SeverityCritical
	}
	return SeverityWarning
}

// escalateSpike: critical when the rate is at least twice the threshold.
func escalateSpike(payload []byte) Severity {
	var p struct {
		Rate              float64 `json:"rate"`
		Threshold         float64 `json:"threshold"`
		CriticalThreshold float64 `json:"critical_threshold"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	critical := p.CriticalThreshold
	if critical <= 0 {
		critical = 2 * p.Threshold
	}
	if critical > 0 && p.Rate >= critical {
		return SeverityCritical
	}
	return ""
}

// escalateDNSChange: critical when a passing check (pass or warn) now
// fails or is missing (fail, none or permerror), as dnscheck.Compare says.
func escalateDNSChange(payload []byte) Severity {
	var p struct {
		Before struct {
			Status string `json:"status"`
		} `json:"before"`
		After struct {
			Status string `json:"status"`
		} `json:"after"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	passing := p.Before.Status == dnscheck.StatusPass || p.Before.Status == dnscheck.StatusWarn
	switch p.After.Status {
	case dnscheck.StatusFail, dnscheck.StatusNone, dnscheck.StatusPermerror:
		if passing {
			return SeverityCritical
		}
	}
	return ""
}
