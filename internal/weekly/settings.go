package weekly

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domainname"
)

// Bounds of the settings.
const (
	MaxSettingDomains = 100
	MaxSettingTags    = 20
)

// Settings are an account's choices for its weekly digest.
type Settings struct {
	// Enabled: mailed at all (default on).
	Enabled bool
	// Domains and Tags narrow the digest to those domains, or the domains
	// carrying one of the tags; both empty: every domain.
	Domains, Tags []string
	// ReplaceDaily: the weekly digest instead of the daily digest of
	// events (default off: both).
	ReplaceDaily bool
}

// Defaults are the settings of an account that chose nothing.
var Defaults = Settings{Enabled: true, Domains: []string{}, Tags: []string{}}

// Chooses reports whether a domain named name with tags is in the digest.
func (s Settings) Chooses(name string, tags []string) bool {
	if len(s.Domains) == 0 && len(s.Tags) == 0 {
		return true
	}
	if slices.Contains(s.Domains, name) {
		return true
	}
	for _, t := range tags {
		if slices.Contains(s.Tags, t) {
			return true
		}
	}
	return false
}

// InvalidError is a setting refused, with the field it concerns.
type InvalidError struct{ Field, Reason string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

// Load returns the account's settings (Defaults when it chose none).
func Load(ctx context.Context, db dbsqlc.DBTX, account uuid.UUID) (Settings, error) {
	row, err := q.WeeklySettingsGet(ctx, db, account)
	if dbutil.IsNotFound(err) {
		return Defaults, nil
	}
	if err != nil {
		return Settings{}, fmt.Errorf("error reading weekly digest settings: %w", err)
	}
	return Settings{Enabled: row.Enabled, Domains: row.Domains, Tags: row.Tags, ReplaceDaily: row.ReplaceDaily}, nil
}

// Save normalises and stores the account's settings: domain names as
// internal/domainname has them, tags trimmed, both deduplicated and
// sorted, within MaxSettingDomains and MaxSettingTags.
func Save(ctx context.Context, db dbsqlc.DBTX, account uuid.UUID, s Settings) (Settings, error) {
	domains, err := normalise(s.Domains, MaxSettingDomains, "domains", domainname.Normalize)
	if err != nil {
		return Settings{}, err
	}
	tags, err := normalise(s.Tags, MaxSettingTags, "tags", func(t string) (string, error) {
		t = strings.TrimSpace(t)
		if t == "" || len(t) > 50 {
			return "", fmt.Errorf("a tag is 1 to 50 characters")
		}
		return t, nil
	})
	if err != nil {
		return Settings{}, err
	}
	row, err := q.WeeklySettingsPut(ctx, db, dbsqlc.WeeklySettingsPutParams{
		AccountID: account, Enabled: s.Enabled, Domains: domains, Tags: tags, ReplaceDaily: s.ReplaceDaily,
	})
	if err != nil {
		return Settings{}, fmt.Errorf("error storing weekly digest settings: %w", err)
	}
	return Settings{Enabled: row.Enabled, Domains: row.Domains, Tags: row.Tags, ReplaceDaily: row.ReplaceDaily}, nil
}

func normalise(in []string, max int, field string, norm func(string) (string, error)) ([]string, error) {
	seen := map[string]bool{}
	out := []string{}
	for _, v := range in {
		n, err := norm(v)
		if err != nil {
			return nil, &InvalidError{Field: field, Reason: fmt.Sprintf("%q: %v", v, err)}
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if len(out) > max {
		return nil, &InvalidError{Field: field, Reason: fmt.Sprintf("at most %d", max)}
	}
	sort.Strings(out)
	return out, nil
}
