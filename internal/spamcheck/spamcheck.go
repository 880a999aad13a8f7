// Package spamcheck asks a content filter what it thinks of a message:
// SpamAssassin's spamd (the SPAMC protocol over TCP) or rspamd (its HTTP
// checkv2 endpoint). The deliverability analysis shows the score, the
// filter's threshold and the rules that fired with their points.
//
// Both filters are operator-run services on a trusted network, configured
// by SPAMD_ADDR or RSPAMD_URL like the database, so they are reached
// directly, not through the SSRF guard that protects user-supplied URLs.
// Every answer is read within bounds (MaxResponse, MaxRules), and a
// message over MaxMessage is not sent at all (ErrTooLarge), as spamc skips
// messages over its size limit.
package spamcheck

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"time"
)

// Result is a filter's verdict on one message.
type Result struct {
	// Engine is "spamassassin" or "rspamd".
	Engine string `json:"engine"`
	// Score is the message's total; Threshold the score from which the
	// filter calls it spam (spamd's required score, rspamd's
	// required_score for the reject action).
	Score     float64 `json:"score"`
	Threshold float64 `json:"threshold"`
	// Spam is the filter's own verdict.
	Spam bool `json:"spam"`
	// Rules are the rules (rspamd: symbols) that fired, by descending
	// absolute points, then name.
	Rules []Rule `json:"rules"`
}

// Rule is one rule that fired.
type Rule struct {
	Name        string  `json:"name"`
	Points      float64 `json:"points"`
	Description string  `json:"description,omitempty"`
}

// Envelope is what the receiving SMTP server knew of the message's
// session; zero fields are not passed on.
type Envelope struct {
	ClientIP netip.Addr
	Helo     string
	MailFrom string
}

// Checker scores one message.
type Checker interface {
	Check(ctx context.Context, msg []byte, env Envelope) (Result, error)
}

// Bounds shared by both clients.
const (
	// MaxMessage is the largest message sent to a filter: spamc's default
	// limit (500 KiB); spamd would otherwise be asked to score what it
	// does not read whole.
	MaxMessage = 500 << 10
	// MaxResponse bounds what is read of an answer.
	MaxResponse = 256 << 10
	// MaxRules bounds the rules kept from an answer.
	MaxRules = 200
	// DefaultTimeout bounds one check, connection included.
	DefaultTimeout = 15 * time.Second
	// maxDescription bounds one rule's description.
	maxDescription = 300
)

// ErrTooLarge is returned for a message over MaxMessage: it is not scored.
var ErrTooLarge = errors.New("spamcheck: the message is over the filters' size limit and was not scored")

// sortRules orders rules by descending absolute points, then name, and
// keeps at most MaxRules.
func sortRules(rules []Rule) []Rule {
	sort.SliceStable(rules, func(i, j int) bool {
		a, b := abs(rules[i].Points), abs(rules[j].Points)
		if a != b {
			return a > b
		}
		return rules[i].Name < rules[j].Name
	})
	if len(rules) > MaxRules {
		rules = rules[:MaxRules]
	}
	if rules == nil {
		rules = []Rule{}
	}
	return rules
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// clip cuts s to n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
