package events

import (
	"fmt"
	"strings"

	"github.com/mailwatch/mailwatch/internal/domainname"
)

// MaxTagFilter bounds the tag an event subscription or a notification
// channel filters on (a domain's tags are bounded alike).
const MaxTagFilter = 64

// NormalizeTagFilter trims a tag filter and checks its length; the error
// completes the sentence "tag_filter ...".
func NormalizeTagFilter(raw string) (string, error) {
	t := strings.TrimSpace(raw)
	if t == "" || len(t) > MaxTagFilter {
		return "", fmt.Errorf("must be 1 to %d characters", MaxTagFilter)
	}
	return t, nil
}

// NormalizeDomainFilter normalises the domain an event subscription or a
// notification channel filters on, as events carry it; the error completes
// the sentence "domain_filter ...".
func NormalizeDomainFilter(raw string) (string, error) {
	return domainname.Normalize(raw)
}
