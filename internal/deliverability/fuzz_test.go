package deliverability

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzMessageChecks runs the message parser and the header and content
// checks on arbitrary input: they must not panic, must stay within their
// limits and must only report findings from the weight table.
func FuzzMessageChecks(f *testing.F) {
	seeds := []string{
		"From: a@b.test\r\nSubject: hi\r\n\r\nbody\r\n",
		"From: A <a@b.test>\r\nFrom: c@d.test\r\nSubject: Re: {{x}}\r\nMessage-ID: nope\r\nDate: never\r\n\r\n",
		"Content-Type: multipart/alternative; boundary=\"b\"\r\nList-Unsubscribe: <mailto:x@y>\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello %%NAME%% world\r\n--b\r\nContent-Type: text/html\r\n\r\n<a href=\"https://bit.ly/x\">www.paypal.com</a><img src=x><script>1</script><iframe></iframe><object></object><embed>\r\n--b--\r\n",
		"Content-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\n\r\n<a href=\"http://[::1\">*|FNAME|*</a><a href=x>\r\n--b--\r\n--a--\r\n",
		"Subject: =?utf-8?q?Re=3A_caf=C3=A9?=\r\n folded\r\n\tagain\r\nnocolon\r\n: empty name\r\n\r\n",
		"\r\n\r\n",
		"",
		"ARC-Seal: i=99999999999999999999; cv=none\r\nDKIM-Signature: v=1; l=10; d=x\r\n\r\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	lim := DefaultLimits()
	lim.MaxHeaders = 50
	lim.MaxHTMLTokens = 2000
	lim.MaxLinks = 20
	lim.MaxWords = 200
	f.Fuzz(func(t *testing.T, raw []byte) {
		msg := parseMessage(raw, lim)
		if len(msg.fields) > lim.MaxHeaders {
			t.Fatalf("%d header fields kept, limit %d", len(msg.fields), lim.MaxHeaders)
		}
		for _, fl := range msg.fields {
			if len(fl.value) > lim.MaxHeaderValueBytes {
				t.Fatalf("header value of %d bytes", len(fl.value))
			}
		}
		if !utf8.ValidString(msg.text) || !utf8.ValidString(msg.html) {
			t.Fatal("body parts are not valid UTF-8")
		}
		sigs := []Signature{{Result: ResultPass, SignedHeaders: []string{"list-unsubscribe", "list-unsubscribe-post"}}}
		findings := checkHeaders(msg, sigs)
		content := checkContent(msg, lim)
		findings = append(findings, content.Findings...)
		a := arcChain(msg)
		if a.Sets < 0 || a.Sets > 50 {
			t.Fatalf("ARC sets %d", a.Sets)
		}
		_ = fromDomain(msg)
		for _, fd := range findings {
			w, ok := WeightOf(fd.ID)
			if !ok {
				t.Fatalf("finding %q is not in the weight table", fd.ID)
			}
			if fd.Points != w.Points || fd.Fix == "" || strings.TrimSpace(fd.Message) == "" {
				t.Fatalf("finding %+v does not match its table row", fd)
			}
		}
		score, grade := Score([]Section{{Findings: findings}})
		if score < 0 || score > 100 || grade == "" {
			t.Fatalf("score %d grade %q", score, grade)
		}
	})
}

// TestScanHTMLLinkBound checks that links past MaxLinks are not kept.
func TestScanHTMLLinkBound(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxLinks = 3
	s := scanHTML(strings.Repeat(`<a href="https://x.example/">x</a>`, 10), lim)
	if len(s.links) != 3 || !s.truncated {
		t.Fatalf("kept %d links, truncated %v", len(s.links), s.truncated)
	}
}

// TestScanHTMLTokenBound checks that a token over the buffer bound stops
// the scan and says so.
func TestScanHTMLTokenBound(t *testing.T) {
	s := scanHTML(`<p>ok</p><a href="https://x.example/`+strings.Repeat("a", maxHTMLToken+10)+`">x</a><script>1</script>`, DefaultLimits())
	if !s.truncated || s.tags["script"] != 0 {
		t.Fatalf("truncated %v, scripts %d", s.truncated, s.tags["script"])
	}
	if s := scanHTML(`<p>ok</p>`, DefaultLimits()); s.truncated {
		t.Fatal("a short document is not truncated")
	}
}
