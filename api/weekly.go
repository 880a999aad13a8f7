package api

import (
	"context"
	"errors"

	"github.com/mailwatch/mailwatch/internal/weekly"
)

// WeeklyDigestSettings is the account's weekly digest: what it covers and
// whether it replaces the daily digest.
type WeeklyDigestSettings struct {
	Enabled      *bool    `json:"enabled" validate:"required" description:"Mail the weekly digest (on Mondays, for the week before) to the verified notification addresses. Default true."`
	Domains      []string `json:"domains" validate:"required,max=100,dive,max=253" description:"Only these domains (with tags: or those carrying a tag); empty with tags empty: every domain. At most 100."`
	Tags         []string `json:"tags" validate:"required,max=20,dive,max=50" description:"Only the domains with one of these tags (or named in domains). At most 20."`
	ReplaceDaily *bool    `json:"replace_daily" validate:"required" description:"Send the weekly digest instead of the daily digest of events (alerts still go out at once). Default false."`
}

func (s *Server) weeklyRoutes() {
	const path, tag = "/api/accounts/me/weekly-digest", "notifications"
	s.ops.GetWeeklyDigest = Handle(s.router, Endpoint[emptyRequest, WeeklyDigestSettings]{
		Method: "GET", Path: path, OperationID: "getWeeklyDigest", Tag: tag,
		Summary: "The weekly digest's settings",
		Description: "Mailed on Mondays for the week before (Monday to Sunday, UTC), even when it was quiet: an overall table, then per " +
			"domain the DMARC pass rate and its trend, sources by category, new sources, enforcement readiness, open alerts, blocklist " +
			"and MX certificate state. At most 50 domains are listed.",
		Call: s.getWeeklyDigest,
	})
	s.ops.SetWeeklyDigest = Handle(s.router, Endpoint[WeeklyDigestSettings, WeeklyDigestSettings]{
		Method: "PUT", Path: path, OperationID: "setWeeklyDigest", Tag: tag,
		Summary:     "Set the weekly digest's settings",
		Description: "Every field is given. Domain names are normalised; a name that is not a domain, or a tag that is empty, is 422.",
		Call:        s.setWeeklyDigest,
	})
}

func weeklyOut(s weekly.Settings) *WeeklyDigestSettings {
	return &WeeklyDigestSettings{Enabled: &s.Enabled, Domains: nonNilSlice(s.Domains), Tags: nonNilSlice(s.Tags), ReplaceDaily: &s.ReplaceDaily}
}

// getWeeklyDigest serves GET /api/accounts/me/weekly-digest.
func (s *Server) getWeeklyDigest(ctx context.Context, _ *emptyRequest) (*WeeklyDigestSettings, error) {
	set, err := weekly.Load(ctx, s.reads, mustCaller(ctx).AccountID)
	if err != nil {
		return nil, err
	}
	return weeklyOut(set), nil
}

// setWeeklyDigest serves PUT /api/accounts/me/weekly-digest.
func (s *Server) setWeeklyDigest(ctx context.Context, req *WeeklyDigestSettings) (*WeeklyDigestSettings, error) {
	set, err := weekly.Save(ctx, s.db, mustCaller(ctx).AccountID, weekly.Settings{
		Enabled: *req.Enabled, Domains: req.Domains, Tags: req.Tags, ReplaceDaily: *req.ReplaceDaily,
	})
	var inv *weekly.InvalidError
	if errors.As(err, &inv) {
		return nil, InvalidField(inv.Field, inv.Reason)
	}
	if err != nil {
		return nil, err
	}
	return weeklyOut(set), nil
}
