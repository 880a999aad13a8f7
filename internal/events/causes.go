package events

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// Likely causes. A critical event about a domain (an effect: a health
// drop, a bounce or complaint spike, a DNS change that broke a passing
// check, TLS failures, a blocklist listing) carries likely_causes: the
// other signals of the same domain in the CauseWindow before it, ranked.
// Nothing is invented: a cause is an event that happened, with its id and
// the payload fields that make it evidence; with none, the list is empty.
//
// The rule: each (effect, cause type) pair has a base weight (causeWeights:
// how often the one explains the other), a DNS change whose check went
// from passing to failing counts double its weight (capped at 100), and
// the weight falls linearly to half over the window with the cause's age.
// The highest scores come first; at most MaxCauses are kept.

// CauseWindow is how far before an effect its causes are looked for.
const CauseWindow = 72 * time.Hour

// MaxCauses bounds the causes an event carries; maxCauseCandidates the
// events read to find them.
const (
	MaxCauses          = 5
	maxCauseCandidates = 100
)

// causeWeights are the base weights, 0 to 100, of each cause type for each
// effect type. A pair absent is never a cause.
var causeWeights = map[string]map[string]int{
	TypeHealthScoreChanged: {TypeDNSRecordChanged: 50, TypeBlocklistListed: 45, TypeDMARCNewSource: 30, TypeTLSReportFailures: 25},
	TypeBounceSpike:        {TypeBlocklistListed: 80, TypeDNSRecordChanged: 45, TypeDMARCNewSource: 60},
	TypeComplaintSpike:     {TypeDMARCNewSource: 60, TypeBlocklistListed: 40, TypeDNSRecordChanged: 20},
	TypeDNSRecordChanged:   {TypeDNSRecordChanged: 30},
	TypeTLSReportFailures:  {TypeDNSRecordChanged: 60},
	TypeBlocklistListed:    {TypeDMARCNewSource: 50, TypeComplaintSpike: 45, TypeBounceSpike: 35},
}

// causeTypes lists every type that can be a cause, for the read.
var causeTypes = func() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range causeWeights {
		for t := range m {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	return out
}()

// Cause is one likely cause of an event.
type Cause struct {
	EventID   uuid.UUID      `json:"event_id"`
	EventType string         `json:"event_type"`
	At        time.Time      `json:"at"`
	Title     string         `json:"title"`
	Summary   string         `json:"summary"`
	Score     int            `json:"score"`
	Evidence  map[string]any `json:"evidence"`
}

// likelyCausesSchema is the JSON Schema of the likely_causes property the
// effect types' payloads carry.
const likelyCausesSchema = `{"type":"array","maxItems":5,"description":"Other signals of the domain in the 72 hours before, most likely first (empty: none found).","items":{
	"type":"object","required":["event_id","event_type","at","title","summary","score","evidence"],"properties":{
	"event_id":{"type":"string","format":"uuid"},"event_type":{"type":"string"},"at":{"type":"string","format":"date-time"},
	"title":{"type":"string"},"summary":{"type":"string"},"score":{"type":"integer","minimum":0,"maximum":100},
	"evidence":{"type":"object"}}}}`

// HasCauses reports whether events of type typ carry likely_causes when
// critical.
func HasCauses(typ string) bool { _, ok := causeWeights[typ]; return ok }

// LikelyCauses ranks the domain's events of the window before at as
// causes of an effect of type typ.
func LikelyCauses(ctx context.Context, db dbsqlc.DBTX, account uuid.UUID, domain, typ string, at time.Time) ([]Cause, error) {
	weights := causeWeights[typ]
	if len(weights) == 0 {
		return []Cause{}, nil
	}
	rows, err := dbsqlc.New().EventCauseCandidates(ctx, db, dbsqlc.EventCauseCandidatesParams{
		AccountID: account, Domain: domain, Types: causeTypes, Since: at.Add(-CauseWindow), Until: at, MaxRows: maxCauseCandidates,
	})
	if err != nil {
		return nil, fmt.Errorf("error reading likely causes: %w", err)
	}
	out := []Cause{}
	for _, r := range rows {
		w, ok := weights[r.EventType]
		if !ok {
			continue
		}
		var p fields
		if json.Unmarshal(r.Payload, &p) != nil {
			continue
		}
		if r.EventType == TypeDNSRecordChanged && brokePass(p) {
			w = min(100, 2*w)
		}
		age := at.Sub(r.CreatedAt)
		score := int(float64(w) * (1 - 0.5*float64(age)/float64(CauseWindow)))
		out = append(out, Cause{EventID: r.ID, EventType: r.EventType, At: r.CreatedAt.UTC(), Title: Title(r.EventType),
			Summary: Summary(r.EventType, r.Payload), Score: score, Evidence: evidence(r.EventType, p)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].At.After(out[j].At)
	})
	return out[:min(len(out), MaxCauses)], nil
}

// brokePass reports whether a dns_record_changed payload shows a check
// that passed failing now (the rule escalateDNSChange applies).
func brokePass(p fields) bool {
	return passing(p.sub("before").str("status")) && !passing(p.sub("after").str("status"))
}

func passing(status string) bool { return status == "pass" || status == "warn" }

// evidenceFields are the payload fields each cause type's evidence keeps.
var evidenceFields = map[string][]string{
	TypeDNSRecordChanged:  {"check", "before", "after"},
	TypeDMARCNewSource:    {"source_ip", "ptr", "base_domain", "messages", "failing"},
	TypeBlocklistListed:   {"list", "zone", "target", "kind", "share", "listed_share"},
	TypeTLSReportFailures: {"org_name", "failed_sessions", "successful_sessions", "failures_by_type"},
	TypeBounceSpike:       {"provider", "rate", "threshold", "bounces", "sent"},
	TypeComplaintSpike:    {"provider", "rate", "threshold", "complaints", "sent"},
}

func evidence(typ string, p fields) map[string]any {
	out := map[string]any{}
	for _, k := range evidenceFields[typ] {
		if v, ok := p[k]; ok {
			out[k] = v
		}
	}
	return out
}

// withCauses returns payload with likely_causes added.
func withCauses(payload []byte, causes []Cause) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, err
	}
	c, err := json.Marshal(causes)
	if err != nil {
		return nil, err
	}
	m["likely_causes"] = c
	return encodePayload(m)
}

// The effect types' schemas say they may carry likely_causes.
func init() {
	for typ := range causeWeights {
		t := types[typ]
		var s map[string]json.RawMessage
		if err := json.Unmarshal(t.PayloadSchema, &s); err != nil {
			panic(fmt.Sprintf("events: schema of %s: %v", typ, err))
		}
		var props map[string]json.RawMessage
		if err := json.Unmarshal(s["properties"], &props); err != nil {
			panic(fmt.Sprintf("events: properties of %s: %v", typ, err))
		}
		props["likely_causes"] = json.RawMessage(likelyCausesSchema)
		var err error
		if s["properties"], err = json.Marshal(props); err != nil {
			panic(err)
		}
		if t.PayloadSchema, err = json.Marshal(s); err != nil {
			panic(err)
		}
		types[typ] = t
	}
}

// CausesOf returns the likely causes a stored payload carries (none when it
// carries no list or an unreadable one).
func CausesOf(payload []byte) []Cause {
	var p struct {
		LikelyCauses []Cause `json:"likely_causes"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return nil
	}
	return p.LikelyCauses
}
