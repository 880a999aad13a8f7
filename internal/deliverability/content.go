package deliverability

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/publicsuffix"

	"github.com/mailwatch/mailwatch/internal/dmarc"
)

// Size thresholds of the content section.
const (
	// LargeMessageBytes is the size from which some receivers refuse or
	// delay a message.
	LargeMessageBytes = 10 << 20
	// GmailClipBytes is the HTML size from which Gmail clips a message.
	GmailClipBytes = 102 << 10
	// disagreeBelow is the share of common words (Jaccard index) under
	// which the text and HTML parts are said to disagree.
	disagreeBelow = 0.25
	// maxLinkText bounds the text kept of one link.
	maxLinkText = 512
	// maxQuoted bounds the examples quoted in a finding.
	maxQuoted = 3
	// maxHTMLToken bounds the bytes of one HTML token.
	maxHTMLToken = 1 << 20
)

// Shorteners are the public URL shortener hosts content_shortener reports.
var Shorteners = []string{
	"bit.ly", "bitly.com", "tinyurl.com", "t.co", "goo.gl", "ow.ly", "is.gd", "buff.ly",
	"rebrand.ly", "cutt.ly", "shorturl.at", "tiny.cc", "bl.ink", "rb.gy", "t.ly", "s.id",
	"lnkd.in", "v.gd", "shorte.st", "adf.ly", "soo.gd", "clck.ru", "qr.ae", "tr.im",
}

var shortener = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range Shorteners {
		m[s] = true
	}
	return m
}()

// placeholderRE matches unreplaced template placeholders: {{name}},
// %%name%% and *|NAME|* (Mailchimp merge tags).
var placeholderRE = regexp.MustCompile(`\{\{[^{}\r\n]{1,80}\}\}|%%[A-Za-z][A-Za-z0-9_ .:-]{0,60}%%|\*\|[A-Za-z][A-Za-z0-9_ :-]{0,60}\|\*`)

// domainInTextRE finds something shaped like a host name or URL in link text.
var domainInTextRE = regexp.MustCompile(`(?i)(?:https?://)?((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63})`)

// link is one <a href> with its text.
type link struct {
	href, text string
}

// htmlScan is what one pass over the HTML found.
type htmlScan struct {
	tags      map[string]int
	imgNoAlt  int
	links     []link
	words     strings.Builder
	truncated bool
}

// checkContent runs the content section.
func checkContent(msg *message, lim Limits) Section {
	sec := Section{Name: SectionContent}
	switch {
	case msg.tooLarge:
		sec.Skipped, sec.Note = true, fmt.Sprintf("the message is %d bytes, over the %d analysed", msg.size, lim.MaxMessageBytes)
		sec.Findings = []Finding{newFinding("message_too_large", sec.Note)}
		return sec
	case msg.parseErr != nil:
		sec.Skipped, sec.Note = true, "the body could not be read: "+msg.parseErr.Error()
		sec.Findings = []Finding{newFinding("message_unparsable", sec.Note)}
		return sec
	}
	var fs []Finding
	if msg.size > LargeMessageBytes {
		fs = append(fs, newFinding("message_large", fmt.Sprintf("the message is %d bytes", msg.size)))
	}
	scan := scanHTML(msg.html, lim)
	if scan.truncated {
		fs = append(fs, newFinding("content_over_limit", fmt.Sprintf("only the first %d HTML tokens and %d links were examined", lim.MaxHTMLTokens, lim.MaxLinks)))
	}
	for _, tag := range []string{"script", "iframe", "object", "embed"} {
		if n := scan.tags[tag]; n > 0 {
			fs = append(fs, newFinding("content_"+tag, fmt.Sprintf("the HTML has %d <%s> element(s)", n, tag)))
		}
	}
	if scan.imgNoAlt > 0 {
		fs = append(fs, newFinding("content_image_no_alt", fmt.Sprintf("%d image(s) have no alt attribute", scan.imgNoAlt)))
	}
	fs = append(fs, placeholderFindings(msg)...)
	fs = append(fs, linkFindings(scan.links)...)
	fs = append(fs, partFindings(msg, scan, lim)...)
	sec.Findings = fs
	return sec
}

// scanHTML tokenizes the HTML once, within MaxHTMLTokens and MaxLinks.
func scanHTML(doc string, lim Limits) *htmlScan {
	s := &htmlScan{tags: map[string]int{}}
	if doc == "" {
		return s
	}
	z := html.NewTokenizer(strings.NewReader(doc))
	z.SetMaxBuf(maxHTMLToken)
	var cur *link
	hidden := 0 // depth inside script and style, whose text is not shown
	for n := 0; ; n++ {
		if n == lim.MaxHTMLTokens {
			s.truncated = true
			break
		}
		tt := z.Next()
		if tt == html.ErrorToken {
			// io.EOF is the end; anything else is a token over the buffer
			// bound, and the rest goes unexamined.
			s.truncated = s.truncated || !errors.Is(z.Err(), io.EOF)
			break
		}
		tok := z.Token()
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			cur = s.startTag(tok, tt, cur, &hidden, lim)
		case html.EndTagToken:
			switch tok.Data {
			case "a":
				cur = nil
			case "script", "style":
				hidden = max(hidden-1, 0)
			}
		case html.TextToken:
			if hidden > 0 {
				continue
			}
			if cur != nil && len(cur.text) < maxLinkText {
				cur.text = truncate(cur.text+tok.Data, maxLinkText)
			}
			if s.words.Len() < lim.MaxWords*16 {
				s.words.WriteString(tok.Data)
				s.words.WriteByte(' ')
			}
		}
	}
	return s
}

// startTag handles a start tag and returns the link being read, if any.
func (s *htmlScan) startTag(tok html.Token, tt html.TokenType, cur *link, hidden *int, lim Limits) *link {
	switch tok.Data {
	case "script", "iframe", "object", "embed":
		s.tags[tok.Data]++
	}
	if (tok.Data == "script" || tok.Data == "style") && tt == html.StartTagToken {
		*hidden++
	}
	switch tok.Data {
	case "img":
		if !hasAttr(tok, "alt") {
			s.imgNoAlt++
		}
	case "a":
		href, ok := attr(tok, "href")
		if !ok || tt == html.SelfClosingTagToken {
			return nil
		}
		if len(s.links) == lim.MaxLinks {
			s.truncated = true
			return nil
		}
		s.links = append(s.links, link{href: strings.TrimSpace(href)})
		return &s.links[len(s.links)-1]
	}
	return cur
}

func attr(tok html.Token, name string) (string, bool) {
	for _, a := range tok.Attr {
		if a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

func hasAttr(tok html.Token, name string) bool {
	_, ok := attr(tok, name)
	return ok
}

// placeholderFindings looks for unreplaced placeholders in the subject and
// bodies.
func placeholderFindings(msg *message) []Finding {
	var found []string
	seen := map[string]bool{}
	for _, s := range []string{msg.decoded("Subject"), msg.text, msg.html} {
		for _, p := range placeholderRE.FindAllString(s, maxQuoted) {
			if !seen[p] && len(found) < maxQuoted {
				seen[p] = true
				found = append(found, fmt.Sprintf("%q", p))
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	return []Finding{newFinding("content_placeholder", "unreplaced placeholder(s): "+strings.Join(found, ", "))}
}

// linkFindings checks link text against the href's domain, and shorteners.
func linkFindings(links []link) []Finding {
	var fs []Finding
	mismatches, shortened := 0, 0
	for _, l := range links {
		u, err := url.Parse(l.href)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			continue
		}
		host := strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
		if shortener[host] && shortened < maxQuoted {
			shortened++
			fs = append(fs, newFinding("content_shortener", fmt.Sprintf("a link goes through the URL shortener %s", host)))
		}
		shown := shownDomain(l.text)
		if shown == "" || mismatches == maxQuoted {
			continue
		}
		if dmarc.OrganizationalDomain(shown) != dmarc.OrganizationalDomain(host) {
			mismatches++
			fs = append(fs, newFinding("content_link_mismatch", fmt.Sprintf("link text names %s but the link goes to %s", shown, host)))
		}
	}
	return fs
}

// shownDomain returns the host name a link's text names, if it names one
// under a real public suffix.
func shownDomain(text string) string {
	m := domainInTextRE.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return ""
	}
	host := strings.TrimPrefix(strings.ToLower(m[1]), "www.")
	suffix, icann := publicsuffix.PublicSuffix(host)
	if !icann || suffix == host {
		return ""
	}
	return host
}

// partFindings compares the text and HTML parts and checks sizes.
func partFindings(msg *message, scan *htmlScan, lim Limits) []Finding {
	var fs []Finding
	textWords := wordSet(msg.text, lim.MaxWords)
	htmlWords := wordSet(scan.words.String(), lim.MaxWords)
	hasText := strings.TrimSpace(msg.text) != ""
	hasHTML := strings.TrimSpace(msg.html) != ""
	switch {
	case !hasText && !hasHTML:
		fs = append(fs, newFinding("content_empty", "the message has neither a text nor an HTML body"))
	case hasHTML && !hasText:
		fs = append(fs, newFinding("content_text_missing", "the message has an HTML part but no text/plain part"))
	case hasHTML && hasText:
		if j := jaccard(textWords, htmlWords); j < disagreeBelow {
			fs = append(fs, newFinding("content_parts_disagree", fmt.Sprintf("the text and HTML parts share %.0f%% of their words", j*100)))
		}
	}
	if len(msg.html) > GmailClipBytes {
		fs = append(fs, newFinding("content_html_clipped", fmt.Sprintf("the HTML part is %d bytes", len(msg.html))))
	}
	return fs
}

// wordSet returns the distinct lower-case words of 3 letters or more, at
// most max of them.
func wordSet(s string, max int) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(set) == max {
			break
		}
		if len([]rune(w)) >= 3 {
			set[strings.ToLower(w)] = true
		}
	}
	return set
}

// jaccard is |a ∩ b| / |a ∪ b|, 1 for two empty sets.
func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	common := 0
	for w := range a {
		if b[w] {
			common++
		}
	}
	return float64(common) / float64(len(a)+len(b)-common)
}
