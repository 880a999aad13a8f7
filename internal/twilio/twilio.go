// Package twilio reads Twilio's inbound SMS webhooks: it checks the
// X-Twilio-Signature header and turns the form Twilio posts into an
// InboundSMS.
//
// Twilio signs a request with base64(HMAC-SHA1(auth token, URL + the POST
// parameters sorted by name, each name followed by its value)), as described
// at https://www.twilio.com/docs/usage/security#validating-requests.
package twilio

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // Twilio's signature scheme is HMAC-SHA1.
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// HeaderSignature is the header carrying Twilio's request signature.
const HeaderSignature = "X-Twilio-Signature"

// ValidateSignature reports whether signature is Twilio's signature of a
// request to fullURL with the POST form parameters form, under authToken.
//
// fullURL is the URL Twilio requested, scheme, host, path and query included,
// as configured in the Twilio console: behind a proxy, rebuild it from the
// public scheme and host. Because Twilio may or may not have included a
// default port (":443", ":80") when signing, both forms are accepted. A
// parameter given several times is signed once per value, values sorted.
// The comparison is constant-time.
func ValidateSignature(authToken, fullURL string, form url.Values, signature string) bool {
	if authToken == "" || signature == "" {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(signature))
	if err != nil || len(got) != sha1.Size {
		return false
	}
	valid := false
	for _, u := range urlVariants(fullURL) {
		// No early return, so timing doesn't tell which variant matched.
		if hmac.Equal(got, sign(authToken, u, form)) {
			valid = true
		}
	}
	return valid
}

// Signature returns the base64 X-Twilio-Signature Twilio would send for a
// request to fullURL with form; for tests and tools that simulate Twilio.
func Signature(authToken, fullURL string, form url.Values) string {
	return base64.StdEncoding.EncodeToString(sign(authToken, fullURL, form))
}

func sign(authToken, fullURL string, form url.Values) []byte {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	// Byte-wise ("Unix-style", case-sensitive) order, as Twilio specifies.
	sort.Strings(keys)

	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(fullURL))
	for _, k := range keys {
		values := append([]string(nil), form[k]...)
		sort.Strings(values)
		for _, v := range values {
			mac.Write([]byte(k))
			mac.Write([]byte(v))
		}
	}
	return mac.Sum(nil)
}

// urlVariants returns fullURL as given and, for http and https URLs, the same
// URL with its default port added or removed.
func urlVariants(fullURL string) []string {
	variants := []string{fullURL}
	u, err := url.Parse(fullURL)
	if err != nil || u.Host == "" {
		return variants
	}
	defaultPort := map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	if defaultPort == "" {
		return variants
	}
	alt := *u
	if port := u.Port(); port == "" {
		alt.Host = net.JoinHostPort(u.Hostname(), defaultPort)
	} else if port == defaultPort {
		alt.Host = u.Hostname()
		if strings.Contains(alt.Host, ":") {
			alt.Host = "[" + alt.Host + "]" // IPv6 literal
		}
	} else {
		return variants
	}
	return append(variants, alt.String())
}

// Limits applied by ParseInboundSMS.
const (
	// MaxBodyBytes bounds the message body. Twilio caps a message at 1600
	// characters; this leaves room for multi-byte characters.
	MaxBodyBytes = 16 << 10

	// MaxMedia is the most media items Twilio attaches to one MMS.
	MaxMedia = 10

	// maxFieldBytes bounds every other field.
	maxFieldBytes = 256
)

// ErrInvalidSMS is returned by ParseInboundSMS for a form that is not a
// usable inbound message.
var ErrInvalidSMS = errors.New("invalid inbound SMS")

// Media is one MMS attachment, hosted by Twilio.
type Media struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
}

// InboundSMS is the message Twilio posts to an incoming-message webhook.
type InboundSMS struct {
	MessageSid          string  `json:"message_sid"`
	AccountSid          string  `json:"account_sid"`
	MessagingServiceSid string  `json:"messaging_service_sid,omitempty"`
	From                string  `json:"from"`
	To                  string  `json:"to"`
	Body                string  `json:"body"`
	NumSegments         int     `json:"num_segments"`
	NumMedia            int     `json:"num_media"`
	Media               []Media `json:"media"`
	FromCountry         string  `json:"from_country,omitempty"`
	ToCountry           string  `json:"to_country,omitempty"`
}

// ParseInboundSMS reads Twilio's incoming-message form. MessageSid (or the
// older SmsMessageSid / SmsSid), From and To are required; the media listed
// by NumMedia are read from MediaUrlN and MediaContentTypeN. Check the
// signature first: this only validates the shape.
func ParseInboundSMS(form url.Values) (*InboundSMS, error) {
	field := func(names ...string) (string, error) {
		for _, name := range names {
			if v := strings.TrimSpace(form.Get(name)); v != "" {
				if len(v) > maxFieldBytes {
					return "", fmt.Errorf("%w: %s is too long", ErrInvalidSMS, name)
				}
				return v, nil
			}
		}
		return "", nil
	}

	sms := &InboundSMS{Media: []Media{}}
	var err error
	for _, f := range []struct {
		dst      *string
		names    []string
		required bool
	}{
		{&sms.MessageSid, []string{"MessageSid", "SmsMessageSid", "SmsSid"}, true},
		{&sms.From, []string{"From"}, true},
		{&sms.To, []string{"To"}, true},
		{&sms.AccountSid, []string{"AccountSid"}, false},
		{&sms.MessagingServiceSid, []string{"MessagingServiceSid"}, false},
		{&sms.FromCountry, []string{"FromCountry"}, false},
		{&sms.ToCountry, []string{"ToCountry"}, false},
	} {
		if *f.dst, err = field(f.names...); err != nil {
			return nil, err
		}
		if f.required && *f.dst == "" {
			return nil, fmt.Errorf("%w: missing %s", ErrInvalidSMS, f.names[0])
		}
	}

	sms.Body = form.Get("Body")
	if len(sms.Body) > MaxBodyBytes {
		return nil, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrInvalidSMS, len(sms.Body), MaxBodyBytes)
	}
	sms.Body = strings.ToValidUTF8(strings.ReplaceAll(sms.Body, "\x00", ""), "\uFFFD")

	if sms.NumSegments, err = count(form, "NumSegments", 0, 1000); err != nil {
		return nil, err
	}
	if sms.NumMedia, err = count(form, "NumMedia", 0, MaxMedia); err != nil {
		return nil, err
	}
	for i := range sms.NumMedia {
		m := Media{
			URL:         strings.TrimSpace(form.Get("MediaUrl" + strconv.Itoa(i))),
			ContentType: strings.TrimSpace(form.Get("MediaContentType" + strconv.Itoa(i))),
		}
		if len(m.URL) > 2048 || len(m.ContentType) > maxFieldBytes {
			return nil, fmt.Errorf("%w: media %d is too long", ErrInvalidSMS, i)
		}
		if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("%w: MediaUrl%d is not an http(s) URL", ErrInvalidSMS, i)
		}
		sms.Media = append(sms.Media, m)
	}

	for _, s := range []string{sms.MessageSid, sms.From, sms.To, sms.AccountSid, sms.MessagingServiceSid, sms.FromCountry, sms.ToCountry} {
		if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }) {
			return nil, fmt.Errorf("%w: control or invalid characters in a field", ErrInvalidSMS)
		}
	}
	return sms, nil
}

// count parses an optional non-negative integer field of at most max.
func count(form url.Values, name string, def, max int) (int, error) {
	v := strings.TrimSpace(form.Get(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("%w: %s must be an integer from 0 to %d", ErrInvalidSMS, name, max)
	}
	return n, nil
}
