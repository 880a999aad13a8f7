// Package inbound turns inbound mail into the message a receiver shows: it
// parses raw RFC 5322 / MIME messages (RFC 2045-2049) with enmime, decodes
// RFC 2047 encoded words and non-UTF-8 charsets to UTF-8, lists attachment
// metadata, and finds the links and one-time codes a test usually waits for.
//
// It also verifies the Standard Webhooks signature of the email ingress
// webhook, which delivers the same raw messages over HTTP.
//
// Everything here is pure: no database, no network, no globals beyond
// constants and compiled regular expressions. Inputs are untrusted, so every
// parser caps its input size and output counts and is fuzzed.
package inbound
