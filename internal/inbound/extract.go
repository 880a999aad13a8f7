package inbound

import (
	"cmp"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// Bounds of the extraction. Links and Codes look at a bounded prefix of the
// bodies and return bounded lists, whatever the input.
const (
	// MaxLinks is the most links Links returns.
	MaxLinks = 100

	// MaxCodes is the most codes Codes returns.
	MaxCodes = 10

	// MaxLinkLength is the longest URL Links keeps; longer ones are skipped.
	MaxLinkLength = 4096

	// maxLinkScanBytes is how much of each body Links scans.
	maxLinkScanBytes = 1 << 20

	// maxCodeScanBytes is how much of the subject and of the text Codes
	// scans: codes sit near the top of a message.
	maxCodeScanBytes = 128 << 10

	// Distances, in bytes, within which a candidate counts as "near" a
	// keyword when it follows or precedes it ("482913 is your code").
	nearAfter  = 60
	nearBefore = 40
	// tightAfter is the distance within which a year-like number still
	// counts as a code ("Your PIN: 2024").
	tightAfter = 12
)

var (
	// textURLRE finds http and https URLs in plain text. The set of
	// characters is RFC 3986's, minus those that commonly delimit a URL in
	// prose (quotes, angle brackets, backticks).
	textURLRE = regexp.MustCompile(`(?i)\bhttps?://[^\s<>"'\x60\x00-\x1f\x7f]+`)

	// Spans masked before looking for codes: digits inside them are never
	// codes. Phone numbers (at least three groups, or a + prefix), dates,
	// times and decimals, money, e-mail addresses, URLs and US zip codes.
	maskURLRE     = regexp.MustCompile(`(?i)\b(?:https?://|www\.)[^\s<>"'\x60]+`)
	maskEmailRE   = regexp.MustCompile(`[\w.+-]+@[\w-]+(?:\.[\w-]+)+`)
	maskPhoneRE   = regexp.MustCompile(`(?:\+\d{1,3}[\s.-]?)?\(?\d{2,4}\)?[\s.-]\d{3,4}[\s.-]\d{3,5}\b|\+\d[\d\s.()-]{6,}\d`)
	maskNumericRE = regexp.MustCompile(`\d+(?:[/:.,]\d+)+`)
	maskMoneyRE   = regexp.MustCompile(`[$€£¥₹]\s?\d[\d,.]*|\d[\d,.]*\s?(?:%|(?i:usd|eur|gbp)\b)`)
	maskZipRE     = regexp.MustCompile(`,\s*[A-Z]{2}\s+\d{5}(?:-\d{4})?\b`)

	// codeKeywordRE finds the words that announce a one-time code.
	codeKeywordRE = regexp.MustCompile(`(?i)\b(?:(?:verification|security|login|sign[- ]?in|confirmation|access|auth(?:entication)?|one[- ]time|2fa|mfa|otp)\s+)?(?:code|codes|otp|pin|passcode|password|token|verification|verify|one[- ]time|2fa|mfa|código|codigo|codice|kode|kod)\b`)

	// Candidate codes: 4 to 8 digits, two groups of 3 or 4 digits, or 4 to 8
	// upper-case letters and digits.
	digitCodeRE   = regexp.MustCompile(`\b\d{4,8}\b`)
	groupedCodeRE = regexp.MustCompile(`\b(?:\d{3}[ -]\d{3}|\d{4}[ -]\d{4})\b`)
	alnumCodeRE   = regexp.MustCompile(`\b[A-Z0-9]{4,8}\b`)
)

// Links returns the distinct http and https URLs found in the plain text body
// and in the href attributes of the HTML body, in order of appearance (text
// first), at most MaxLinks.
func Links(text, htmlBody string) []string {
	links := []string{}
	seen := make(map[string]bool)
	add := func(raw string) bool {
		if len(links) == MaxLinks {
			return false
		}
		if u, ok := cleanLink(raw); ok && !seen[u] {
			seen[u] = true
			links = append(links, u)
		}
		return true
	}

	for _, raw := range textURLRE.FindAllString(truncate(text, maxLinkScanBytes), -1) {
		if !add(trimURLPunctuation(raw)) {
			return links
		}
	}

	z := html.NewTokenizer(strings.NewReader(truncate(htmlBody, maxLinkScanBytes)))
	z.SetMaxBuf(maxLinkScanBytes)
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return links
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		_, hasAttr := z.TagName()
		for hasAttr {
			var key, val []byte
			key, val, hasAttr = z.TagAttr()
			if string(key) == "href" && !add(string(val)) {
				return links
			}
		}
	}
}

// cleanLink validates an absolute http(s) URL, returning it without the
// whitespace HTML allows around and inside an href.
func cleanLink(raw string) (string, bool) {
	raw = strings.TrimSpace(raw)
	raw = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(raw)
	if raw == "" || len(raw) > MaxLinkLength {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false
	}
	if scheme := strings.ToLower(u.Scheme); scheme != "http" && scheme != "https" {
		return "", false
	}
	return cleanText(raw, MaxLinkLength), true
}

// trimURLPunctuation drops the sentence punctuation that prose puts right
// after a URL, and a closing bracket without its opening one, as in
// "(see https://example.com/a)".
func trimURLPunctuation(s string) string {
	for len(s) > 0 {
		last := s[len(s)-1]
		switch last {
		case '.', ',', ';', ':', '!', '?', '*':
			s = s[:len(s)-1]
			continue
		case ')', ']', '}':
			open := map[byte]string{')': "(", ']': "[", '}': "{"}[last]
			if strings.Count(s, open) < strings.Count(s, string(last)) {
				s = s[:len(s)-1]
				continue
			}
		}
		return s
	}
	return s
}

// Codes returns the likely one-time codes (OTP, verification codes, PINs) in
// a subject and plain text body, best first, at most MaxCodes.
//
// Codes next to a keyword such as "code", "OTP", "PIN" or "verification"
// come first, the closest first; they may be 4 to 8 digits, two groups of
// digits ("123 456", returned without the separator) or upper-case letters
// and digits ("A7K9QZ"). Other standalone 4 to 8 digit numbers follow, except
// years. Digits inside URLs, e-mail addresses, phone numbers, dates, times,
// amounts of money and longer numbers are never codes.
func Codes(subject, text string) []string {
	// One string, so that a keyword in the subject ("Your sign-in code")
	// also anchors a code at the top of the body.
	s := truncate(subject, maxCodeScanBytes) + "\n\n\n" + truncate(text, maxCodeScanBytes)
	masked := maskNonCodes(s)

	keywords := codeKeywordRE.FindAllStringIndex(masked, -1)

	type candidate struct {
		code     string
		pos      int
		distance int // to the nearest keyword; -1 when none is near
	}
	var candidates []candidate
	// keywords are in text order and don't overlap, so the nearest one on
	// either side is found by binary search.
	nearest := func(start, end int) int {
		best := -1
		// The last keyword ending at or before start.
		if i := sort.Search(len(keywords), func(i int) bool { return keywords[i][1] > start }); i > 0 {
			if d := start - keywords[i-1][1]; d <= nearAfter {
				best = d
			}
		}
		// The first keyword starting at or after end.
		if i := sort.Search(len(keywords), func(i int) bool { return keywords[i][0] >= end }); i < len(keywords) {
			if d := keywords[i][0] - end; d <= nearBefore && (best < 0 || d < best) {
				best = d
			}
		}
		return best
	}
	overlaps := func(spans [][]int, start, end int) bool {
		// The last span starting before end is the only one that can overlap.
		i := sort.Search(len(spans), func(i int) bool { return spans[i][0] >= end })
		return i > 0 && spans[i-1][1] > start
	}

	var grouped [][]int
	for _, m := range groupedCodeRE.FindAllStringIndex(masked, -1) {
		if isolated(masked, m[0], m[1]) {
			if d := nearest(m[0], m[1]); d >= 0 {
				code := strings.NewReplacer(" ", "", "-", "").Replace(masked[m[0]:m[1]])
				candidates = append(candidates, candidate{code, m[0], d})
				grouped = append(grouped, m)
			}
		}
	}
	for _, m := range digitCodeRE.FindAllStringIndex(masked, -1) {
		if !isolated(masked, m[0], m[1]) || overlaps(grouped, m[0], m[1]) {
			continue
		}
		code := masked[m[0]:m[1]]
		d := nearest(m[0], m[1])
		if isYear(code) && (d < 0 || d > tightAfter) {
			continue
		}
		candidates = append(candidates, candidate{code, m[0], d})
	}
	for _, m := range alnumCodeRE.FindAllStringIndex(masked, -1) {
		code := masked[m[0]:m[1]]
		if !isolated(masked, m[0], m[1]) || overlaps(keywords, m[0], m[1]) || !mixedAlnum(code) {
			continue
		}
		if d := nearest(m[0], m[1]); d >= 0 {
			candidates = append(candidates, candidate{code, m[0], d})
		}
	}

	// Near candidates first, closest first; then the rest in text order.
	slices.SortStableFunc(candidates, func(a, b candidate) int {
		an, bn := a.distance >= 0, b.distance >= 0
		switch {
		case an && !bn:
			return -1
		case !an && bn:
			return 1
		case an && bn && a.distance != b.distance:
			return cmp.Compare(a.distance, b.distance)
		}
		return cmp.Compare(a.pos, b.pos)
	})

	codes := []string{}
	seen := make(map[string]bool)
	for _, c := range candidates {
		if len(codes) == MaxCodes {
			break
		}
		if !seen[c.code] {
			seen[c.code] = true
			codes = append(codes, c.code)
		}
	}
	return codes
}

// maskNonCodes blanks out, keeping byte offsets, the spans whose digits are
// never one-time codes.
func maskNonCodes(s string) string {
	b := []byte(s)
	for _, re := range []*regexp.Regexp{maskURLRE, maskEmailRE, maskPhoneRE, maskNumericRE, maskMoneyRE, maskZipRE} {
		for _, m := range re.FindAllIndex(b, -1) {
			for i := m[0]; i < m[1]; i++ {
				b[i] = ' '
			}
		}
	}
	return string(b)
}

// isolated reports whether s[start:end] stands alone: not glued by a hyphen
// or dot to more digits ("555-1234"), not a reference ("#1234") and not a
// signed or prefixed amount ("+1234", "$1234").
func isolated(s string, start, end int) bool {
	if start > 0 {
		switch s[start-1] {
		case '#', '+', '$', '=', '/', '&', '@', '_':
			return false
		case '-', '.':
			if start > 1 && isDigit(s[start-2]) {
				return false
			}
		}
	}
	if end < len(s) {
		switch s[end] {
		case '%', '@', '_', '/':
			return false
		case '-', '.':
			if end+1 < len(s) && isDigit(s[end+1]) {
				return false
			}
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isYear reports whether a 4-digit number looks like a year.
func isYear(code string) bool {
	if len(code) != 4 {
		return false
	}
	n, err := strconv.Atoi(code)
	return err == nil && n >= 1900 && n <= 2099
}

// mixedAlnum reports whether code has both letters and digits: all-digit
// codes are found by the digit pattern, all-letter ones are words.
func mixedAlnum(code string) bool {
	return strings.ContainsAny(code, "0123456789") && strings.ContainsAny(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
}

// truncate cuts s to at most n bytes. It may split a rune; callers only
// match ASCII patterns near the cut.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
