package twilio

import (
	"encoding/json"
	"github.com/mailwatch/mailwatch/internal/corpus"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// corpusFile reads a file of the shared third-party corpus, which lives
// outside the repository (internal/corpus: a missing corpus fails the test).
func corpusFile(t *testing.T, name string) []byte {
	t.Helper()
	return corpus.Read(t, "esp/"+name)
}

type signatureVector struct {
	AuthToken         string            `json:"auth_token"`
	URL               string            `json:"url"`
	Params            map[string]string `json:"params"`
	ExpectedSignature string            `json:"expected_signature"`
}

func loadVector(t *testing.T) (signatureVector, url.Values) {
	t.Helper()
	var v signatureVector
	require.NoError(t, json.Unmarshal(corpusFile(t, "twilio-signature-vector.json"), &v))
	form := url.Values{}
	for k, val := range v.Params {
		form.Set(k, val)
	}
	return v, form
}

func TestValidateSignature(t *testing.T) {
	t.Parallel()

	t.Run("CorpusVector", func(t *testing.T) {
		t.Parallel()
		v, form := loadVector(t)
		require.True(t, ValidateSignature(v.AuthToken, v.URL, form, v.ExpectedSignature))
		require.Equal(t, v.ExpectedSignature, Signature(v.AuthToken, v.URL, form))
	})

	t.Run("Tampered", func(t *testing.T) {
		t.Parallel()
		v, form := loadVector(t)

		changed := func(f func(url.Values)) url.Values {
			c := url.Values{}
			for k, vals := range form {
				c[k] = append([]string(nil), vals...)
			}
			f(c)
			return c
		}
		for name, tc := range map[string]struct {
			token, url string
			form       url.Values
			sig        string
		}{
			"Token":          {"54321", v.URL, form, v.ExpectedSignature},
			"EmptyToken":     {"", v.URL, form, v.ExpectedSignature},
			"URLQuery":       {v.AuthToken, strings.Replace(v.URL, "foo=1", "foo=2", 1), form, v.ExpectedSignature},
			"URLScheme":      {v.AuthToken, strings.Replace(v.URL, "https:", "http:", 1), form, v.ExpectedSignature},
			"ParamValue":     {v.AuthToken, v.URL, changed(func(f url.Values) { f.Set("Digits", "1235") }), v.ExpectedSignature},
			"ParamAdded":     {v.AuthToken, v.URL, changed(func(f url.Values) { f.Set("Body", "x") }), v.ExpectedSignature},
			"ParamRemoved":   {v.AuthToken, v.URL, changed(func(f url.Values) { f.Del("Caller") }), v.ExpectedSignature},
			"ParamRenamed":   {v.AuthToken, v.URL, changed(func(f url.Values) { f.Set("digits", f.Get("Digits")); f.Del("Digits") }), v.ExpectedSignature},
			"Signature":      {v.AuthToken, v.URL, form, "A" + v.ExpectedSignature[1:]},
			"EmptySignature": {v.AuthToken, v.URL, form, ""},
			"NotBase64":      {v.AuthToken, v.URL, form, "!!!"},
			"Truncated":      {v.AuthToken, v.URL, form, v.ExpectedSignature[:20]},
		} {
			require.False(t, ValidateSignature(tc.token, tc.url, tc.form, tc.sig), name)
		}
	})

	t.Run("DefaultPort", func(t *testing.T) {
		t.Parallel()
		form := url.Values{"From": {"+31612345678"}, "Body": {"hi"}}

		// Signed without the port, checked with it, and the reverse.
		sig := Signature("tok", "https://api.example.com/api/webhooks/sms", form)
		require.True(t, ValidateSignature("tok", "https://api.example.com:443/api/webhooks/sms", form, sig))
		sig = Signature("tok", "http://[::1]:80/sms?x=1", form)
		require.True(t, ValidateSignature("tok", "http://[::1]/sms?x=1", form, sig))

		// A non-default port is part of the URL.
		sig = Signature("tok", "https://api.example.com:8443/sms", form)
		require.False(t, ValidateSignature("tok", "https://api.example.com/sms", form, sig))
	})

	t.Run("RepeatedParameter", func(t *testing.T) {
		t.Parallel()
		a := url.Values{"Tag": {"b", "a"}, "From": {"+1"}}
		b := url.Values{"Tag": {"a", "b"}, "From": {"+1"}}
		sig := Signature("tok", "https://example.com/sms", a)
		require.True(t, ValidateSignature("tok", "https://example.com/sms", b, sig))
		require.False(t, ValidateSignature("tok", "https://example.com/sms", url.Values{"Tag": {"a"}, "From": {"+1"}}, sig))
	})
}

func TestParseInboundSMS(t *testing.T) {
	t.Parallel()

	t.Run("CorpusForm", func(t *testing.T) {
		t.Parallel()
		form, err := url.ParseQuery(strings.TrimSpace(string(corpusFile(t, "twilio-inbound-sms.form.txt"))))
		require.NoError(t, err)

		sms, err := ParseInboundSMS(form)
		require.NoError(t, err)
		require.Equal(t, &InboundSMS{
			MessageSid:          "SMb711289e438f577f230f5837e9c74a08",
			AccountSid:          "ACf54dd7a47a8011d65b54d472a7190549",
			MessagingServiceSid: "MG790b6bd09f119b54ffb7f03b8841b1c9",
			From:                "+31612345678",
			To:                  "+3197014204768",
			Body:                "St",
			NumSegments:         1,
			NumMedia:            0,
			Media:               []Media{},
			FromCountry:         "NL",
			ToCountry:           "NL",
		}, sms)
	})

	t.Run("MMS", func(t *testing.T) {
		t.Parallel()
		sms, err := ParseInboundSMS(url.Values{
			"SmsSid": {"SM1"}, "From": {"+1"}, "To": {"+2"}, "Body": {"Your code is 123456"},
			"NumMedia":  {"2"},
			"MediaUrl0": {"https://api.twilio.com/m0"}, "MediaContentType0": {"image/jpeg"},
			"MediaUrl1": {"https://api.twilio.com/m1"}, "MediaContentType1": {"image/png"},
		})
		require.NoError(t, err)
		require.Equal(t, "SM1", sms.MessageSid)
		require.Equal(t, []Media{
			{URL: "https://api.twilio.com/m0", ContentType: "image/jpeg"},
			{URL: "https://api.twilio.com/m1", ContentType: "image/png"},
		}, sms.Media)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		base := func() url.Values {
			return url.Values{"MessageSid": {"SM1"}, "From": {"+1"}, "To": {"+2"}, "Body": {"x"}}
		}
		for name, mutate := range map[string]func(url.Values){
			"MissingSid":      func(f url.Values) { f.Del("MessageSid") },
			"MissingFrom":     func(f url.Values) { f.Del("From") },
			"MissingTo":       func(f url.Values) { f.Set("To", "  ") },
			"LongBody":        func(f url.Values) { f.Set("Body", strings.Repeat("x", MaxBodyBytes+1)) },
			"LongField":       func(f url.Values) { f.Set("From", strings.Repeat("1", 300)) },
			"NumMediaText":    func(f url.Values) { f.Set("NumMedia", "two") },
			"NumMediaTooMany": func(f url.Values) { f.Set("NumMedia", "11") },
			"NumMediaNoURL":   func(f url.Values) { f.Set("NumMedia", "1") },
			"MediaNotHTTP":    func(f url.Values) { f.Set("NumMedia", "1"); f.Set("MediaUrl0", "file:///etc/passwd") },
			"ControlChars":    func(f url.Values) { f.Set("To", "+2\n+3") },
			"InvalidUTF8":     func(f url.Values) { f.Set("From", "\xff") },
		} {
			f := base()
			mutate(f)
			_, err := ParseInboundSMS(f)
			require.ErrorIs(t, err, ErrInvalidSMS, name)
		}

		sms, err := ParseInboundSMS(url.Values{"MessageSid": {"SM1"}, "From": {"+1"}, "To": {"+2"}, "Body": {"a\x00b\xff"}})
		require.NoError(t, err)
		require.Equal(t, "ab\uFFFD", sms.Body)
	})
}

// FuzzParseInboundSMS checks that any form either fails with ErrInvalidSMS or
// gives a message within bounds.
//
//	go test -fuzz FuzzParseInboundSMS ./internal/twilio
func FuzzParseInboundSMS(f *testing.F) {
	f.Add("ToCountry=NL&SmsMessageSid=SM1&NumMedia=0&Body=St&To=%2B3197014204768&MessageSid=SM1&From=%2B31612345678")
	f.Add("MessageSid=SM1&From=%2B1&To=%2B2&NumMedia=1&MediaUrl0=https%3A%2F%2Fa.b%2Fm&MediaContentType0=image%2Fpng")
	f.Add("MessageSid=SM1&From=%2B1&To=%2B2&NumMedia=-1&NumSegments=99999")
	f.Add("From=&To=&Body=%00%FF")

	f.Fuzz(func(t *testing.T, query string) {
		form, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		sms, err := ParseInboundSMS(form)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidSMS)
			return
		}
		require.NotEmpty(t, sms.MessageSid)
		require.NotEmpty(t, sms.From)
		require.NotEmpty(t, sms.To)
		require.LessOrEqual(t, len(sms.Body), MaxBodyBytes*3)
		require.True(t, utf8.ValidString(sms.Body))
		require.NotContains(t, sms.Body, "\x00")
		require.Len(t, sms.Media, sms.NumMedia)
		require.LessOrEqual(t, sms.NumMedia, MaxMedia)
	})
}
