package web

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/events"
)

// dmarcDays is how many UTC days a domain page's DMARC charts cover.
const dmarcDays = 30

// dmarcCharts draws a domain's aggregate-report days: messages per day by
// source category (stacked), and the day's DMARC pass rate (days without
// reports have no point), each day marked with the signals of that day
// (new sources, subdomains, selectors, reporters). Without any report,
// nothing: the sources section says so.
func dmarcCharts(d *api.DMARCDaily, signals []events.Signal) (volume, rate template.HTML) {
	marks := dayMarks(signals)
	vc := chart{ID: "dmarc-chart", Title: fmt.Sprintf("DMARC messages per day by source category, last %d days", len(d.Days)), Stacked: true,
		Series: []chartSeries{{Name: "Compliant", Class: "bar-0"}, {Name: "Forwarded", Class: "bar-1"},
			{Name: "Non-compliant (known sender)", Class: "bar-3"}, {Name: "Threat or unknown", Class: "bar-2"}}}
	rc := chart{ID: "dmarc-pass-chart", Title: fmt.Sprintf("DMARC pass rate per day, last %d days", len(d.Days)), YMax: 100, YUnit: "%",
		Series: []chartSeries{{Name: "Pass rate", Class: "line-0"}}}
	var total, passing int64
	reported := 0
	for _, v := range d.Days {
		at, err := time.Parse(time.DateOnly, v.Date)
		if err != nil {
			continue
		}
		vc.Points = append(vc.Points, chartPoint{At: at, Mark: marks[v.Date],
			Values: []float64{float64(v.Compliant), float64(v.Forwarded), float64(v.NonCompliant), float64(v.ThreatUnknown)}})
		p := chartPoint{At: at, Mark: marks[v.Date]}
		if v.PassRate != nil {
			p.Values = []float64{*v.PassRate * 100}
			reported++
		}
		rc.Points = append(rc.Points, p)
		total += v.Messages
		passing += v.Compliant + v.Forwarded
	}
	if total == 0 {
		return "", ""
	}
	vc.Desc = fmt.Sprintf("%d messages reported over %d days, %s passing DMARC, by the category of their source.",
		total, len(d.Days), formatValue(float64(passing)*100/float64(total))+"%")
	rc.Desc = fmt.Sprintf("The share of each day's reported messages that passed DMARC, on the %d days with reports.", reported)
	return vc.render(), rc.render()
}

// marksPerDay is how many signals a day's mark names.
const marksPerDay = 3

// dayMarks words the signals per UTC day (YYYY-MM-DD): the first
// marksPerDay, oldest first, and how many more.
func dayMarks(signals []events.Signal) map[string]string {
	byDay := map[string][]string{}
	for i := len(signals) - 1; i >= 0; i-- { // newest first in, oldest first out
		s := signals[i]
		day := s.At.Format(time.DateOnly)
		byDay[day] = append(byDay[day], s.Title+": "+s.Summary)
	}
	out := make(map[string]string, len(byDay))
	for day, list := range byDay {
		m := strings.Join(list[:min(len(list), marksPerDay)], "; ")
		if extra := len(list) - marksPerDay; extra > 0 {
			m += fmt.Sprintf("; and %d more", extra)
		}
		out[day] = m
	}
	return out
}
