package inbound

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLinks(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		text string
		html string
		want []string
	}{
		{
			name: "TextURLs",
			text: "Open https://example.com/a?b=1&c=2, or http://example.org. Done",
			want: []string{"https://example.com/a?b=1&c=2", "http://example.org"},
		},
		{
			name: "TrailingPunctuationAndBrackets",
			text: "(see https://example.com/x) [https://example.com/wiki/Go_(lang)] <https://example.com/angle>!",
			want: []string{"https://example.com/x", "https://example.com/wiki/Go_(lang)", "https://example.com/angle"},
		},
		{
			name: "HTMLHrefs",
			html: `<a href="https://example.com/1?a=1&amp;b=2">x</a><A HREF=' https://example.com/2 '>y</A>` +
				`<a href="mailto:x@example.com">m</a><a href="/relative">r</a><a href="javascript:alert(1)">j</a>` +
				`<area href="http://example.com/map"><link href="https://example.com/style.css">`,
			want: []string{"https://example.com/1?a=1&b=2", "https://example.com/2", "http://example.com/map", "https://example.com/style.css"},
		},
		{
			name: "DeduplicatedTextFirst",
			text: "https://example.com/a https://example.com/a",
			html: `<a href="https://example.com/b">b</a><a href="https://example.com/a">a</a>`,
			want: []string{"https://example.com/a", "https://example.com/b"},
		},
		{
			name: "NoHost",
			text: "http:// https:///path ftp://example.com",
			want: []string{},
		},
		{
			name: "UpperCaseScheme",
			text: "HTTPS://EXAMPLE.COM/Path",
			want: []string{"HTTPS://EXAMPLE.COM/Path"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Links(tc.text, tc.html))
		})
	}

	t.Run("Bounded", func(t *testing.T) {
		t.Parallel()

		var text strings.Builder
		for i := range MaxLinks * 2 {
			fmt.Fprintf(&text, "https://example.com/%d\n", i)
		}
		links := Links(text.String(), `<a href="https://example.com/html">x</a>`)
		require.Len(t, links, MaxLinks)
		require.Equal(t, "https://example.com/0", links[0])

		long := "https://example.com/" + strings.Repeat("a", MaxLinkLength)
		require.Empty(t, Links(long, ""))
	})
}

func TestCodes(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		subject string
		text    string
		want    []string
	}{
		{name: "Plain", text: "Your verification code is 482913.", want: []string{"482913"}},
		{name: "CodeFirst", text: "G-582014 is your Google verification code.", want: []string{"582014"}},
		{name: "Subject", subject: "739201 is your login code", text: "Thanks", want: []string{"739201"}},
		{name: "SubjectKeywordBodyCode", subject: "Your sign-in code", text: "381920\n\nIt expires soon.", want: []string{"381920"}},
		{name: "OTP", text: "OTP: 8812", want: []string{"8812"}},
		{name: "PIN", text: "Your PIN is 0042", want: []string{"0042"}},
		{name: "Grouped", text: "Your code: 123 456", want: []string{"123456"}},
		{name: "GroupedDash", text: "Enter code 123-456 to continue", want: []string{"123456"}},
		{name: "Alphanumeric", text: "Your confirmation code is A7K9QZ", want: []string{"A7K9QZ"}},
		{name: "AlphanumericNeedsKeyword", text: "Flight AB1234 departs", want: []string{}},
		{name: "YearNearKeywordStillCode", text: "Your PIN: 2024", want: []string{"2024"}},
		{name: "YearsSkipped", text: "© 2024 Example Inc. Since 1999.", want: []string{}},
		{name: "Phone", text: "Call +1 415 555 0100 or (415) 555-0100 or 415-555-0100 or +31612345678", want: []string{}},
		{name: "LocalPhone", text: "Call 555-1234", want: []string{}},
		{name: "URLNumbers", text: "https://example.com/verify/123456?id=987654 and www.example.com/555555", want: []string{}},
		{name: "EmailNumbers", text: "Write to user123456@example.com", want: []string{}},
		{name: "DatesTimesMoney", text: "On 12/05/2024 at 10:30 pay $1234 or 1,234.56 EUR, 45.6789, 99%", want: []string{}},
		{name: "Reference", text: "Order #123456 shipped", want: []string{}},
		{name: "Zip", text: "Example Inc, 1 Main St, San Francisco, CA 94107", want: []string{}},
		{name: "LongNumber", text: "Account 1234567890123", want: []string{}},
		{name: "StandaloneDigitsAfterNearOnes", text: "Ticket 55555 was opened.\n\n" + strings.Repeat("filler ", 20) + "Your code is 7788.", want: []string{"7788", "55555"}},
		{name: "ClosestKeywordWins", text: "Your security code is 112233. Reference 445566 for support.", want: []string{"112233", "445566"}},
		{name: "Deduplicated", text: "Code 4321. Again: code 4321.", want: []string{"4321"}},
		{name: "Empty", want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Codes(tc.subject, tc.text))
		})
	}

	t.Run("Bounded", func(t *testing.T) {
		t.Parallel()

		var text strings.Builder
		for i := range 1000 {
			fmt.Fprintf(&text, "code %d\n", 100000+i)
		}
		codes := Codes("", text.String())
		require.Len(t, codes, MaxCodes)
	})
}
