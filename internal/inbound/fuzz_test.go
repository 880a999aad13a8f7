package inbound

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mailwatch/mailwatch/internal/mimelimit"
	"github.com/mailwatch/mailwatch/internal/mimetest"
)

// FuzzParse checks that Parse never panics and that whatever it returns keeps
// the Message invariants: valid UTF-8, no NUL, non-nil and bounded lists.
//
//	go test -fuzz FuzzParse ./internal/inbound
func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".eml") {
			raw, err := os.ReadFile(filepath.Join("testdata", e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
	for _, s := range []string{
		"Subject: x\r\n\r\nbody",
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n--b--",
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n",
		"Content-Type: message/rfc822\r\n\r\nContent-Type: message/rfc822\r\n\r\nSubject: nested\r\n\r\n",
		"Content-Type: text/plain; charset=iso-2022-jp\r\nContent-Transfer-Encoding: base64\r\n\r\nGyRCJDMkcyRLJEEkTxsoQg==\r\n",
		"From: =?utf-8?b?=?= <@>\r\nTo: a@b, , <c@d\r\n\r\n",
		"\r\n\r\n\r\n",
		" folded-first-line: x\r\n\r\n",
	} {
		f.Add([]byte(s))
	}

	// Deep nesting (refused), and just within the limit.
	f.Add(mimetest.Nested(200))
	f.Add(mimetest.Nested(mimelimit.DefaultMaxDepth))

	f.Fuzz(func(t *testing.T, raw []byte) {
		msg, err := Parse(raw)
		if err != nil {
			if msg != nil {
				t.Fatal("message returned with an error")
			}
			return
		}
		if msg.To == nil || msg.Cc == nil || msg.Headers == nil || msg.Attachments == nil || msg.Links == nil || msg.Codes == nil {
			t.Fatal("nil list in message")
		}
		if len(msg.Headers) > MaxHeaders || len(msg.Attachments) > MaxAttachments ||
			len(msg.To) > MaxRecipients || len(msg.Cc) > MaxRecipients {
			t.Fatal("unbounded list in message")
		}
		checkString := func(s string) {
			if !utf8.ValidString(s) || strings.Contains(s, "\x00") {
				t.Fatalf("invalid text %q", s)
			}
		}
		for _, s := range []string{msg.Subject, msg.Text, msg.HTML, msg.From.Name, msg.From.Address, msg.MessageID} {
			checkString(s)
		}
		for _, h := range msg.Headers {
			checkString(h.Name)
			checkString(h.Value)
			if len(h.Value) > MaxHeaderValueBytes {
				t.Fatal("header value over limit")
			}
		}
		for _, a := range msg.Attachments {
			checkString(a.Filename)
			checkString(a.ContentType)
			if a.Disposition != DispositionInline && a.Disposition != DispositionAttachment {
				t.Fatalf("bad disposition %q", a.Disposition)
			}
		}
	})
}

// FuzzExtract checks that Links and Codes never panic and always return
// bounded lists of well-formed values.
//
//	go test -fuzz FuzzExtract ./internal/inbound
func FuzzExtract(f *testing.F) {
	f.Add("Your code", "Your verification code is 482913. See https://example.com/x.", `<a href="https://example.com/y">y</a>`)
	f.Add("", "G-123456 is your code. Call +1 415 555 0100 on 12/05/2024.", "")
	f.Add("123 456", "code: A7K9QZ (https://example.com/a_(b)) www.example.com/1234", `<a href=" http://x.example/?a=1&amp;b=2 ">`)
	f.Add("PIN 2024", "#1234 $5678 1,234.56 555-1234 CA 94107", `<a href="javascript:x"><area href=http://[::1]:80/>`)
	f.Add("\xff\xfe", "code\x00123456\xff", "<a href=\"\xffhttp://a\">")

	f.Fuzz(func(t *testing.T, subject, text, htmlBody string) {
		links := Links(text, htmlBody)
		if links == nil || len(links) > MaxLinks {
			t.Fatalf("bad links list: %d", len(links))
		}
		seen := make(map[string]bool)
		for _, l := range links {
			if seen[l] {
				t.Fatalf("duplicate link %q", l)
			}
			seen[l] = true
			if len(l) > MaxLinkLength || !utf8.ValidString(l) {
				t.Fatalf("bad link %q", l)
			}
			u, err := url.Parse(l)
			if err != nil || u.Host == "" {
				t.Fatalf("invalid link %q: %v", l, err)
			}
			if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
				t.Fatalf("link with scheme %q", s)
			}
		}

		codes := Codes(subject, text)
		if codes == nil || len(codes) > MaxCodes {
			t.Fatalf("bad codes list: %d", len(codes))
		}
		seen = make(map[string]bool)
		for _, c := range codes {
			if seen[c] {
				t.Fatalf("duplicate code %q", c)
			}
			seen[c] = true
			if len(c) < 4 || len(c) > 8 || strings.Trim(c, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
				t.Fatalf("bad code %q", c)
			}
		}
	})
}
