package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// envelope is the body of every push.
type envelope struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

// Payload builds the body of a push: {"type", "timestamp", "data"} with
// timestamp in RFC 3339 UTC. Build it once, when the delivery is created,
// and store the bytes: every attempt must send exactly the same bytes (the
// signature covers them and receivers de-duplicate on webhook-id). data may
// be a json.RawMessage holding the stored event payload; it is embedded
// as is (compacted). HTML characters are not escaped.
func Payload(eventType string, timestamp time.Time, data any) ([]byte, error) {
	if eventType == "" {
		return nil, errors.New("error building webhook payload: empty event type")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(envelope{
		Type:      eventType,
		Timestamp: timestamp.UTC().Format(time.RFC3339Nano),
		Data:      data,
	})
	if err != nil {
		return nil, fmt.Errorf("error building webhook payload: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
