package deliverability

import (
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strings"
)

// messageIDRE is the shape RFC 5322 section 3.6.4 gives msg-id: <left@right>.
var messageIDRE = regexp.MustCompile(`^<[^<>@\s]+@[^<>@\s]+>$`)

// replyPrefixRE matches a subject that says it is a reply.
var replyPrefixRE = regexp.MustCompile(`(?i)^\s*re\s*:`)

// checkHeaders runs the headers section.
func checkHeaders(msg *message, sigs []Signature) []Finding {
	var fs []Finding
	if msg.headersTruncated {
		fs = append(fs, newFinding("headers_over_limit", fmt.Sprintf("the message has more header fields than the %d examined", len(msg.fields))))
	}
	fs = append(fs, fromFindings(msg)...)

	switch ids := msg.values("Message-ID"); {
	case len(ids) == 0:
		fs = append(fs, newFinding("message_id_missing", "the message has no Message-ID header"))
	case len(ids) > 1 || !messageIDRE.MatchString(ids[0]):
		fs = append(fs, newFinding("message_id_invalid", fmt.Sprintf("Message-ID %q is not a single <left@right>", truncate(ids[0], 200))))
	}
	switch dates := msg.values("Date"); {
	case len(dates) == 0:
		fs = append(fs, newFinding("date_missing", "the message has no Date header"))
	default:
		if _, err := mail.ParseDate(dates[0]); err != nil || len(dates) > 1 {
			fs = append(fs, newFinding("date_invalid", fmt.Sprintf("Date %q is not a single RFC 5322 date", truncate(dates[0], 200))))
		}
	}
	if len(msg.values("MIME-Version")) == 0 {
		fs = append(fs, newFinding("mime_version_missing", "the message has no MIME-Version header"))
	}
	fs = append(fs, unsubscribeFindings(msg, sigs)...)
	if replyPrefixRE.MatchString(msg.decoded("Subject")) && msg.value("In-Reply-To") == "" && msg.value("References") == "" {
		fs = append(fs, newFinding("reply_without_thread", "the subject starts with \"Re:\" but the message has no In-Reply-To or References"))
	}
	return fs
}

// fromFindings checks for exactly one From with one valid address.
func fromFindings(msg *message) []Finding {
	froms := msg.values("From")
	switch len(froms) {
	case 0:
		return []Finding{newFinding("from_missing", "the message has no From header")}
	case 1:
	default:
		return []Finding{newFinding("from_multiple", fmt.Sprintf("the message has %d From headers", len(froms)))}
	}
	list, err := mail.ParseAddressList(froms[0])
	switch {
	case err != nil:
		return []Finding{newFinding("from_invalid", fmt.Sprintf("From %q does not parse: %v", truncate(froms[0], 200), err))}
	case len(list) > 1:
		return []Finding{newFinding("from_multiple", fmt.Sprintf("From names %d addresses", len(list)))}
	}
	return nil
}

// oneClickValue is the List-Unsubscribe-Post value of RFC 8058 section 3.1.
const oneClickValue = "List-Unsubscribe=One-Click"

// unsubscribeFindings checks List-Unsubscribe (RFC 2369) with an https URI,
// the one-click List-Unsubscribe-Post (RFC 8058), and that a passing DKIM
// signature covers both (RFC 8058 section 4).
func unsubscribeFindings(msg *message, sigs []Signature) []Finding {
	var fs []Finding
	lu := msg.value("List-Unsubscribe")
	switch {
	case lu == "":
		fs = append(fs, newFinding("list_unsubscribe_missing", "the message has no List-Unsubscribe header"))
	case !hasHTTPSURI(lu):
		fs = append(fs, newFinding("list_unsubscribe_no_https", "List-Unsubscribe has no https URL"))
	}
	post := strings.TrimSpace(msg.value("List-Unsubscribe-Post"))
	if !strings.EqualFold(post, oneClickValue) {
		fs = append(fs, newFinding("one_click_missing", "the message has no \"List-Unsubscribe-Post: List-Unsubscribe=One-Click\" header"))
		return fs
	}
	if lu == "" {
		return fs
	}
	for _, s := range sigs {
		if s.Result == ResultPass && slices.Contains(s.SignedHeaders, "list-unsubscribe") && slices.Contains(s.SignedHeaders, "list-unsubscribe-post") {
			return fs
		}
	}
	return append(fs, newFinding("one_click_unsigned", "no passing DKIM signature covers both List-Unsubscribe and List-Unsubscribe-Post"))
}

// hasHTTPSURI reports whether a List-Unsubscribe value has an <https://...>
// URI (RFC 2369 section 2: angle-bracketed, comma-separated).
func hasHTTPSURI(v string) bool {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if strings.HasPrefix(part, "<") && strings.HasSuffix(part, ">") {
			u := strings.TrimSpace(part[1 : len(part)-1])
			if len(u) > len("https://") && strings.EqualFold(u[:len("https://")], "https://") {
				return true
			}
		}
	}
	return false
}
