package web

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/domains"
)

// overviewDomains is how many domains the overview ranks by health; the
// domains page lists them all.
const overviewDomains = 10

type overviewData struct {
	Summary *api.DashboardSummary
	Domains []domains.Ranked
	Alerts  []api.Alert
	Failing []api.Delivery
}

func (h *Dashboard) webOverview(c *fiber.Ctx) error {
	sum, err := h.ops.DashboardSummary.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	d := overviewData{Summary: sum}
	if d.Domains, err = domains.Lowest(c.UserContext(), h.deps.DB, callerOf(c).AccountID, overviewDomains); err != nil {
		return h.pageError(c, err)
	}
	no, limit := false, 10
	if p, err := h.ops.ListAlerts.Call(c.UserContext(), callerOf(c), &api.ListAlertsRequest{Acknowledged: &no, PageParams: api.PageParams{Limit: &limit}}); err == nil {
		if d.Alerts, err = p.Entries(); err != nil {
			return err
		}
	} else {
		return h.pageError(c, err)
	}
	for _, status := range []string{"failed", "retrying"} {
		p, err := h.ops.ListDeliveries.Call(c.UserContext(), callerOf(c), &api.ListDeliveriesRequest{Status: status, Limit: &limit})
		if err != nil {
			return h.pageError(c, err)
		}
		d.Failing = append(d.Failing, p.Items...)
	}
	return h.render(c, http.StatusOK, "overview", "Overview", d, "")
}
