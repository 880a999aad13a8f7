package web

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/providers"
)

// overviewDomains is how many domains the overview ranks by health; the
// domains page lists them all.
const overviewDomains = 10

type overviewData struct {
	Summary *api.DashboardSummary
	Domains []domains.Ranked
	Alerts  []api.Alert
	Failing []api.Delivery
	// URLs are the failing deliveries' destinations.
	URLs map[uuid.UUID]string
	// Volume and Rates are the charts of the last overviewDays days of mail.
	Volume, Rates template.HTML
}

// overviewDays is how many UTC days the overview's charts cover.
const overviewDays = 14

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
	if len(d.Failing) > 0 {
		if d.URLs, err = h.subscriptionURLs(c); err != nil {
			return h.pageError(c, err)
		}
	}
	days := overviewDays
	vol, err := h.ops.MessageDailyVolume.Call(c.UserContext(), callerOf(c), &api.MessageDailyVolumeRequest{Days: &days})
	if err != nil {
		return h.pageError(c, err)
	}
	d.Volume, d.Rates = mailCharts(vol.Volume)
	return h.render(c, http.StatusOK, "overview", "Overview", d, "")
}

// mailCharts draws the days of sending-provider events: recipients per day
// by outcome, and the bounce and complaint rates against the levels that
// raise bounce_spike and complaint_spike. Without any mail, one sentence.
func mailCharts(days []api.MessageDayVolume) (volume, rates template.HTML) {
	var total int64
	vc := chart{ID: "mail-chart", Title: fmt.Sprintf("Messages per day, last %d days", len(days)), Stacked: true,
		Series: []chartSeries{{Name: "Delivered", Class: "bar-0"}, {Name: "Complaints", Class: "bar-1"}, {Name: "Bounced", Class: "bar-2"}}}
	rules := providers.DefaultSpikeRules
	rc := chart{ID: "rates-chart", Title: fmt.Sprintf("Bounce and complaint rates per day, last %d days", len(days)), YUnit: "%",
		Series: []chartSeries{{Name: "Bounce rate", Class: "line-1"}, {Name: "Complaint rate", Class: "line-0"}},
		Thresholds: []chartThreshold{
			{Value: rules.Bounce.Warning * 100, Label: fmt.Sprintf("bounces %s%%", formatValue(rules.Bounce.Warning*100))},
			{Value: rules.Complaint.Critical * 100, Label: fmt.Sprintf("complaints %s%%", formatValue(rules.Complaint.Critical*100))},
		}}
	for _, v := range days {
		at, err := time.Parse(time.DateOnly, v.Date)
		if err != nil {
			continue
		}
		vc.Points = append(vc.Points, chartPoint{At: at, Values: []float64{float64(v.Delivered), float64(v.Complained), float64(v.Bounced)}})
		counts := providers.Counts{Sent: v.Sent, Delivered: v.Delivered, Bounced: v.Bounced, Complained: v.Complained}
		total += counts.Volume()
		rc.Points = append(rc.Points, chartPoint{At: at, Values: []float64{counts.Rate(v.Bounced) * 100, counts.Rate(v.Complained) * 100}})
	}
	if total == 0 {
		return template.HTML(`<p class="hint">No mail in the last ` + strconv.Itoa(len(days)) + ` days: connect a sending provider to see it here.</p>`), ""
	}
	vc.Desc = fmt.Sprintf("%d recipients over %d days, by outcome.", total, len(days))
	rc.Desc = "Bounces and complaints per recipient each day; the dashed lines are the levels that raise a spike event."
	return vc.render(), rc.render()
}
