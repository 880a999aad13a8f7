// Package webhook pushes events to subscribers' HTTP endpoints following the
// Standard Webhooks specification (https://www.standardwebhooks.com/).
//
// It is the transport half of delivery and knows nothing of the database or
// the job queue: the River push worker stores the body built once by Payload,
// calls Send for each attempt with a client from NewClient, records the
// returned Attempt, and schedules the next attempt with NextDelay. A Gate
// bounds the pushes in flight per account and per destination host, so
// that one tenant's slow endpoints cost only that tenant (fairness.go).
//
// Every request carries:
//
//	webhook-id:        the message id, stable across retries (receivers
//	                   de-duplicate on it)
//	webhook-timestamp: Unix seconds of the attempt
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//	content-type:      application/json
//
// where key is the base64 decoding of the subscription's secret after its
// "whsec_" prefix. The body is {"type", "timestamp", "data"}.
//
// Success is a 2xx answer within the client timeout (15 s). Redirects are not
// followed: a 3xx is a failure of class "redirect", so a subscriber cannot
// bounce a signed request to an address it chooses, and the URL stays the one
// that passed validation.
package webhook
