package web

import (
	"net/http"
	"sort"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/api"
)

type overviewData struct {
	Summary *api.DashboardSummary
	Domains []api.Domain
	Alerts  []api.Alert
	Failing []api.Delivery
}

func (h *Dashboard) webOverview(c *fiber.Ctx) error {
	sum, err := h.ops.DashboardSummary.Call(c.UserContext(), callerOf(c), &api.EmptyRequest{})
	if err != nil {
		return h.pageError(c, err)
	}
	d := overviewData{Summary: sum}
	if doms, err := h.ops.ListDomains.Call(c.UserContext(), callerOf(c), &api.ListDomainsRequest{}); err == nil {
		// By health: the lowest score first, domains not scored yet last.
		d.Domains = *doms
		sort.SliceStable(d.Domains, func(i, j int) bool {
			a, b := d.Domains[i].Score, d.Domains[j].Score
			if a == nil || b == nil {
				return b == nil && a != nil
			}
			return *a < *b
		})
	} else {
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
