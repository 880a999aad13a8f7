package api

import (
	"context"
	"sort"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// UsageRequest is GET /api/accounts/me/usage.
type UsageRequest struct {
	Days *int `query:"days" validate:"omitempty,min=1,max=90" default:"7" description:"UTC days to cover, ending today: 1 to 90 (default 7)."`
}

// Usage counts the account's API requests per UTC day and key.
type Usage struct {
	Days  int         `json:"days" validate:"required"`
	From  string      `json:"from" validate:"required" format:"date" description:"First UTC day covered."`
	To    string      `json:"to" validate:"required" format:"date" description:"Last UTC day covered (today)."`
	Total int64       `json:"total" validate:"required"`
	Keys  []UsageKey  `json:"keys" validate:"required" description:"Requests per key over the whole range, most used first; keys without requests are left out."`
	Daily []UsageDate `json:"daily" validate:"required" description:"One entry per day, oldest first, days without requests included."`
}

// UsageKey is one key's requests.
type UsageKey struct {
	APIKeyID      uuid.UUID `json:"api_key_id" validate:"required"`
	KeyIdentifier string    `json:"key_identifier" validate:"required"`
	Label         string    `json:"label" validate:"required"`
	Requests      int64     `json:"requests" validate:"required"`
}

// UsageDate is one UTC day of Usage.
type UsageDate struct {
	Date     string     `json:"date" validate:"required" format:"date"`
	Requests int64      `json:"requests" validate:"required"`
	Keys     []UsageKey `json:"keys" validate:"required" description:"Requests of each key that was used that day."`
}

func (s *Server) usageRoutes() {
	Handle(s.router, Endpoint[UsageRequest, Usage]{
		Method: "GET", Path: "/api/accounts/me/usage", OperationID: "apiUsage", Tag: "api keys",
		Summary: "API requests per UTC day and key",
		Description: "Authenticated requests made with the account's keys (revoked keys included while their history " +
			"is kept). Requests are counted in memory and written in batches, so the latest requests appear " +
			"within about 10 s.",
		Call: s.usage,
	})
}

func (s *Server) usage(ctx context.Context, req *UsageRequest) (*Usage, error) {
	n := daysParam(req.Days, 7)
	from, to := s.dayRange(n)
	rows, err := s.q.APIUsageByDay(ctx, s.db, dbsqlc.APIUsageByDayParams{AccountID: mustCaller(ctx).AccountID, Since: from})
	if err != nil {
		return nil, err
	}
	out := &Usage{Days: n, From: from.Format(dateLayout), To: to.Format(dateLayout), Keys: []UsageKey{}, Daily: make([]UsageDate, n)}
	index := make(map[string]int, n)
	for i := range out.Daily {
		d := from.AddDate(0, 0, i).Format(dateLayout)
		out.Daily[i] = UsageDate{Date: d, Keys: []UsageKey{}}
		index[d] = i
	}
	perKey := map[uuid.UUID]int{}
	for _, r := range rows {
		i, ok := index[r.Day.Format(dateLayout)]
		if !ok {
			continue
		}
		k := UsageKey{APIKeyID: r.APIKeyID, KeyIdentifier: r.KeyIdentifier, Label: r.Label, Requests: r.Requests}
		day := &out.Daily[i]
		day.Keys = append(day.Keys, k)
		day.Requests += r.Requests
		out.Total += r.Requests
		if j, ok := perKey[r.APIKeyID]; ok {
			out.Keys[j].Requests += r.Requests
		} else {
			perKey[r.APIKeyID] = len(out.Keys)
			out.Keys = append(out.Keys, k)
		}
	}
	sort.SliceStable(out.Keys, func(i, j int) bool {
		if out.Keys[i].Requests != out.Keys[j].Requests {
			return out.Keys[i].Requests > out.Keys[j].Requests
		}
		return out.Keys[i].KeyIdentifier < out.Keys[j].KeyIdentifier
	})
	return out, nil
}
