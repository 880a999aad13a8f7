package web

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Charts are server-rendered SVG: no script, no build step. Each is a
// figure with a title and a description the screen reader announces, axis
// labels, and the same numbers as a table under a disclosure, so that a
// chart is never the only way to read them. Colours are the stylesheet's
// (dark on light, WCAG AA against white).

// chartPoint is one x position: its time and its values, one per series.
type chartPoint struct {
	At     time.Time
	Values []float64
	// Mark, when set, flags the point (an event that moved the line) and
	// says why.
	Mark string
}

// chartSeries names a series and its style class (line-0, bar-1, ...).
type chartSeries struct {
	Name  string
	Class string
}

// chart is a time chart: lines, or bars stacked per point.
type chart struct {
	ID, Title, Desc string
	Series          []chartSeries
	Points          []chartPoint
	Stacked         bool
	// YMax is the axis maximum (0: the data's, rounded up); YUnit follows
	// each tick ("%").
	YMax  float64
	YUnit string
	// Thresholds are dashed horizontal lines with a label.
	Thresholds []chartThreshold
	// TimeFormat formats the x labels and the table's first column.
	TimeFormat string
}

type chartThreshold struct {
	Value float64
	Label string
}

const (
	chartW, chartH           = 720.0, 220.0
	chartLeft, chartRight    = 44.0, 12.0
	chartTop, chartBottom    = 12.0, 30.0
	chartPlotW               = chartW - chartLeft - chartRight
	chartPlotH               = chartH - chartTop - chartBottom
	chartXTicks, chartYTicks = 5, 4
	chartDefaultTimeFormat   = "Jan 2"
)

// render draws the chart, or a sentence when it has no point.
func (c chart) render() template.HTML {
	if len(c.Points) == 0 {
		return template.HTML(`<p class="hint">` + template.HTMLEscapeString(c.Title) + `: no data yet.</p>`)
	}
	l := c.layout()
	e := template.HTMLEscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<figure class="chart-figure" id="%s"><svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="%s-t %s-d">`,
		e(c.ID), chartW, chartH, e(c.ID), e(c.ID))
	fmt.Fprintf(&b, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, e(c.ID), e(c.Title), e(c.ID), e(c.Desc))
	c.writeAxes(&b, l)
	if c.Stacked {
		c.writeBars(&b, l)
	} else {
		c.writeLines(&b, l)
	}
	c.writeMarks(&b, l)
	b.WriteString(`</svg>`)
	c.writeLegend(&b)
	c.writeTable(&b, l)
	b.WriteString(`</figure>`)
	return template.HTML(b.String()) //nolint:gosec // every value written is escaped
}

// chartLayout is where a chart's points and values go.
type chartLayout struct {
	tf      string
	ymax    float64
	n       int
	barW    float64
	stacked bool
}

func (c chart) layout() chartLayout {
	l := chartLayout{tf: c.TimeFormat, ymax: c.YMax, n: len(c.Points), stacked: c.Stacked}
	if l.tf == "" {
		l.tf = chartDefaultTimeFormat
	}
	if l.ymax <= 0 {
		for _, p := range c.Points {
			sum := 0.0
			for _, v := range p.Values {
				if c.Stacked {
					sum += v
				} else {
					sum = math.Max(sum, v)
				}
			}
			l.ymax = math.Max(l.ymax, sum)
		}
		for _, t := range c.Thresholds {
			l.ymax = math.Max(l.ymax, t.Value)
		}
		// Whole steps between the ticks (counts never read 1.25).
		l.ymax = niceCeil(l.ymax/chartYTicks) * chartYTicks
	}
	l.barW = math.Max(2, math.Min(24, chartPlotW/float64(l.n)*0.7))
	return l
}

// x is the position of point i: bars in the middle of their slot, lines
// from edge to edge (one point in the middle).
func (l chartLayout) x(i int) float64 {
	if l.stacked {
		return chartLeft + (float64(i)+0.5)*chartPlotW/float64(l.n)
	}
	if l.n == 1 {
		return chartLeft + chartPlotW/2
	}
	return chartLeft + float64(i)*chartPlotW/float64(l.n-1)
}

func (l chartLayout) y(v float64) float64 { return chartTop + chartPlotH - v/l.ymax*chartPlotH }

// writeAxes writes the gridlines with their values, a few evenly spread
// times, and the thresholds.
func (c chart) writeAxes(b *strings.Builder, l chartLayout) {
	e := template.HTMLEscapeString
	for i := 0; i <= chartYTicks; i++ {
		v := l.ymax * float64(i) / chartYTicks
		fmt.Fprintf(b, `<line class="grid" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/><text class="ytick" x="%.0f" y="%.1f" text-anchor="end">%s</text>`,
			chartLeft, chartW-chartRight, l.y(v), l.y(v), chartLeft-4, l.y(v)+4, e(formatValue(v)+c.YUnit))
	}
	ticks := min(chartXTicks, l.n)
	for k := range ticks {
		i := 0
		if ticks > 1 {
			i = k * (l.n - 1) / (ticks - 1)
		}
		anchor := "middle"
		if l.n > 1 && i == 0 && !c.Stacked {
			anchor = "start"
		} else if l.n > 1 && i == l.n-1 && !c.Stacked {
			anchor = "end"
		}
		fmt.Fprintf(b, `<text class="xtick" x="%.1f" y="%.0f" text-anchor="%s">%s</text>`, l.x(i), chartH-10, anchor, e(c.Points[i].At.UTC().Format(l.tf)))
	}
	for _, t := range c.Thresholds {
		fmt.Fprintf(b, `<line class="threshold" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/><text class="threshold-label" x="%.0f" y="%.1f" text-anchor="end">%s</text>`,
			chartLeft, chartW-chartRight, l.y(t.Value), l.y(t.Value), chartW-chartRight-2, l.y(t.Value)-3, e(t.Label))
	}
}

// writeBars stacks each point's values, zero values drawing nothing.
func (c chart) writeBars(b *strings.Builder, l chartLayout) {
	e := template.HTMLEscapeString
	for i, p := range c.Points {
		base := 0.0
		for s, v := range p.Values {
			if v <= 0 {
				continue
			}
			fmt.Fprintf(b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s: %s</title></rect>`,
				e(c.Series[s].Class), l.x(i)-l.barW/2, l.y(base+v), l.barW, l.y(base)-l.y(base+v), e(p.At.UTC().Format(l.tf)), e(c.Series[s].Name), e(formatValue(v)+c.YUnit))
			base += v
		}
	}
}

// writeLines draws each series as a line with a dot per point.
func (c chart) writeLines(b *strings.Builder, l chartLayout) {
	e := template.HTMLEscapeString
	for s, ser := range c.Series {
		pts := make([]string, 0, l.n)
		for i, p := range c.Points {
			if s < len(p.Values) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", l.x(i), l.y(p.Values[s])))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline class="%s" points="%s"/>`, e(ser.Class), strings.Join(pts, " "))
		}
		for i, p := range c.Points {
			if s < len(p.Values) {
				fmt.Fprintf(b, `<circle class="%s" cx="%.1f" cy="%.1f" r="3"><title>%s %s: %s</title></circle>`,
					e(ser.Class), l.x(i), l.y(p.Values[s]), e(p.At.UTC().Format(l.tf)), e(ser.Name), e(formatValue(p.Values[s])+c.YUnit))
			}
		}
	}
}

// writeMarks flags the marked points with a line and a triangle.
func (c chart) writeMarks(b *strings.Builder, l chartLayout) {
	e := template.HTMLEscapeString
	for i, p := range c.Points {
		if p.Mark != "" {
			fmt.Fprintf(b, `<g class="mark"><line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f"/><path d="M%.1f %.0f l-5 -8 h10 z"/><title>%s: %s</title></g>`,
				l.x(i), l.x(i), chartTop, chartTop+chartPlotH, l.x(i), chartTop+8, e(p.At.UTC().Format(l.tf)), e(p.Mark))
		}
	}
}

// writeLegend names the series (a single line needs none).
func (c chart) writeLegend(b *strings.Builder) {
	if len(c.Series) < 2 && !c.Stacked {
		return
	}
	b.WriteString(`<ul class="legend">`)
	for _, s := range c.Series {
		fmt.Fprintf(b, `<li><span class="swatch %s" aria-hidden="true"></span>%s</li>`, template.HTMLEscapeString(s.Class), template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</ul>`)
}

// writeTable writes the numbers as a table under a disclosure.
func (c chart) writeTable(b *strings.Builder, l chartLayout) {
	e := template.HTMLEscapeString
	fmt.Fprintf(b, `<details class="chart-table"><summary>%s as a table</summary><div class="scroll"><table class="list"><thead><tr><th scope="col">Time</th>`, e(c.Title))
	for _, s := range c.Series {
		fmt.Fprintf(b, `<th scope="col">%s</th>`, e(s.Name))
	}
	hasMarks := false
	for _, p := range c.Points {
		hasMarks = hasMarks || p.Mark != ""
	}
	if hasMarks {
		b.WriteString(`<th scope="col">Event</th>`)
	}
	b.WriteString(`</tr></thead><tbody>`)
	for _, p := range c.Points {
		fmt.Fprintf(b, `<tr><td>%s</td>`, e(p.At.UTC().Format(l.tf)))
		for s := range c.Series {
			if s < len(p.Values) {
				fmt.Fprintf(b, `<td>%s</td>`, e(formatValue(p.Values[s])+c.YUnit))
			} else {
				b.WriteString(`<td>—</td>`) // no value that day
			}
		}
		if hasMarks {
			fmt.Fprintf(b, `<td>%s</td>`, e(p.Mark))
		}
		b.WriteString(`</tr>`)
	}
	b.WriteString(`</tbody></table></div></details>`)
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// formatValue writes a number with at most two decimals and no trailing
// zeros: 3, 2.5, 33.33.
func formatValue(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
