package main

import (
	"encoding/json"
	"fmt"

	"github.com/mailwatch/mailwatch/internal/events"
)

// benchEventMix is the fixed set of events `scripts/bench events` seeds,
// drawn uniformly: the eleven types the events issue registered, each with
// the example payload it had when the first figures were taken
// (2026-11-22). The bench used to cycle through every registered type's
// current example, so each new type or richer example made the pages
// larger and the figures of different sessions incomparable. These
// payloads are the bench's own copies: changing the registry's examples
// does not change what is measured. Mean payload 169 bytes; a 50-event
// page of this mix is about 18 KB (the bench prints both).
var benchEventMix = []struct {
	Type    string
	Payload json.RawMessage
}{
	{events.TypeHealthScoreChanged, json.RawMessage(`{"domain":"example.com","previous_score":82,"score":45,"delta":-37,` +
		`"reasons":["DMARC policy changed to none","SPF exceeds 10 DNS lookups"]}`)},
	{events.TypeBounceSpike, json.RawMessage(`{"domain":"example.com","provider":"postmark","window_minutes":60,` +
		`"rate":0.082,"threshold":0.05,"bounces":41,"sent":500}`)},
	{events.TypeComplaintSpike, json.RawMessage(`{"domain":"example.com","provider":"ses","window_minutes":1440,` +
		`"rate":0.004,"threshold":0.003,"complaints":12,"sent":3000}`)},
	{events.TypeDNSRecordChanged, json.RawMessage(`{"domain":"example.com","check":"spf",` +
		`"before":{"status":"pass","records":["v=spf1 include:_spf.example.net -all"]},` +
		`"after":{"status":"fail","records":[]}}`)},
	{events.TypeWebhookDeliveryFailed, json.RawMessage(`{"delivery_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f70",` +
		`"subscription_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f71","event_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f72",` +
		`"event_type":"bounce_spike","url":"https://hooks.example.com/mailwatch","attempts":10,` +
		`"last_status_code":500,"last_error":"HTTP 500"}`)},
	{events.TypeSubscriptionDisabled, json.RawMessage(`{"subscription_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f71",` +
		`"url":"https://hooks.example.com/mailwatch","reason":"endpoint answered 410 Gone"}`)},
	{events.TypeDMARCReportReceived, json.RawMessage(`{"domain":"example.com","org_name":"google.com","report_id":"1234567890",` +
		`"begin":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z","messages":1520,"pass_rate":0.98}`)},
	{events.TypeReceiverMessageReceived, json.RawMessage(`{"receiver_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f73",` +
		`"message_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f74","channel":"email","from":"noreply@example.com",` +
		`"subject":"Your sign-in code","label":"signup test"}`)},
	{events.TypeAlertAcknowledged, json.RawMessage(`{"alert_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f75","alert_type":"health_score_changed",` +
		`"acknowledged_by":"alice@example.com","note":"DMARC record restored","key_identifier":"mw_AbCd"}`)},
	{events.TypeAlertUnacknowledged, json.RawMessage(`{"alert_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f75","alert_type":"health_score_changed",` +
		`"previously_acknowledged_by":"alice@example.com","previous_note":"DMARC record restored","key_identifier":"mw_AbCd"}`)},
	{events.TypeMessageDeleted, json.RawMessage(`{"receiver_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f73",` +
		`"message_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f74","key_identifier":"mw_AbCd"}`)},
}

// benchEventTypes resolves the mix against the registry (for the default
// severities) and describes it for the bench output.
func benchEventTypes() ([]events.Type, string, error) {
	types := make([]events.Type, 0, len(benchEventMix))
	total := 0
	for _, m := range benchEventMix {
		t, ok := events.Lookup(m.Type)
		if !ok {
			return nil, "", fmt.Errorf("bench event mix: %s is no longer registered", m.Type)
		}
		if !json.Valid(m.Payload) {
			return nil, "", fmt.Errorf("bench event mix: %s payload is not JSON", m.Type)
		}
		t.Example = m.Payload
		types = append(types, t)
		total += len(m.Payload)
	}
	desc := fmt.Sprintf("pinned mix: %d types of issue 3 with their 2026-11-22 payloads (mean %d bytes), drawn uniformly",
		len(types), total/len(types))
	return types, desc, nil
}
