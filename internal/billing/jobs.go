package billing

// StripeEventArgs applies one stored Stripe event (stripe_events.id). The
// args live here, beside the applier, so that the webhook intake (api/)
// inserts them without importing the workers (jobs/).
type StripeEventArgs struct {
	EventID string `json:"event_id"`
}

// Kind implements river.JobArgs.
func (StripeEventArgs) Kind() string { return "stripe_event" }
