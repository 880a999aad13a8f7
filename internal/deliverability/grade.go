package deliverability

// Severity of a finding.
type Severity string

// Severities, from least to most serious.
const (
	// Info is worth knowing and costs no points.
	Info Severity = "info"
	// Warning lowers the chance of reaching the inbox.
	Warning Severity = "warning"
	// Error makes rejection or the spam folder likely.
	Error Severity = "error"
)

// Sections of a report, in the order they are shown.
const (
	SectionAuthentication = "authentication"
	SectionReputation     = "reputation"
	SectionSpam           = "spam"
	SectionHeaders        = "headers"
	SectionContent        = "content"
)

// Weight is one row of the published grading table: a finding, how serious
// it is, the points it costs and how to fix it.
type Weight struct {
	ID       string
	Section  string
	Severity Severity
	// Points are taken from 100 once per analysis, however many times the
	// finding occurs.
	Points int
	Fix    string
}

// Weights is the grading table. docs/features/deliverability.md publishes
// it; a test keeps the two identical.
var Weights = []Weight{
	{"spf_fail", SectionAuthentication, Error, 25, "Add the sending server's address to the SPF record of the MAIL FROM domain (an ip4:, ip6: or include: of your provider)."},
	{"spf_softfail", SectionAuthentication, Warning, 15, "Add the sending server's address to the SPF record of the MAIL FROM domain; ~all only softens the failure."},
	{"spf_neutral", SectionAuthentication, Warning, 10, "List the sending server in the SPF record and end it with -all or ~all instead of ?all."},
	{"spf_none", SectionAuthentication, Warning, 15, "Publish an SPF record (a TXT record \"v=spf1 ... -all\") at the MAIL FROM domain."},
	{"spf_permerror", SectionAuthentication, Error, 15, "Fix the SPF record: one record only, valid syntax, at most 10 DNS lookups and 2 void lookups."},
	{"spf_temperror", SectionAuthentication, Warning, 5, "Make sure the SPF record's DNS servers answer; receivers defer or distrust mail they cannot check."},
	{"helo_spf", SectionAuthentication, Info, 0, "Publish an SPF record for the HELO name (\"v=spf1 a -all\" on the host itself) so bounces from it authenticate."},
	{"dkim_none", SectionAuthentication, Error, 20, "Sign outgoing mail with DKIM (RFC 6376) using a key published under your domain."},
	{"dkim_fail", SectionAuthentication, Error, 25, "Make sure no system changes the message after signing, and that the selector's key in DNS matches the signing key."},
	{"dkim_signature_failed", SectionAuthentication, Warning, 2, "Remove or repair the signature that does not verify; another passing signature keeps the message authenticated."},
	{"dkim_weak_key", SectionAuthentication, Warning, 5, "Use an RSA key of at least 2048 bits (or Ed25519 alongside RSA)."},
	{"dkim_sha1", SectionAuthentication, Warning, 5, "Sign with rsa-sha256; rsa-sha1 is obsolete (RFC 8301)."},
	{"dkim_length_tag", SectionAuthentication, Warning, 5, "Sign the whole body: drop the l= tag, which lets anyone append content."},
	{"dmarc_fail", SectionAuthentication, Error, 25, "Make SPF or DKIM pass with the From domain: sign with d= your From domain, or use a MAIL FROM under it."},
	{"dmarc_none", SectionAuthentication, Warning, 10, "Publish a DMARC record at _dmarc of your domain, starting with \"v=DMARC1; p=none; rua=mailto:...\"."},
	{"dmarc_permerror", SectionAuthentication, Error, 10, "Keep exactly one valid DMARC record at _dmarc of your domain."},
	{"dmarc_temperror", SectionAuthentication, Warning, 5, "Make sure the DMARC record's DNS servers answer."},
	{"dmarc_policy_none", SectionAuthentication, Info, 2, "Once reports show all your mail passing, move the DMARC policy to p=quarantine, then p=reject."},
	{"fcrdns_fail", SectionAuthentication, Warning, 10, "Give the sending IP a PTR record naming a host whose A/AAAA record points back to the same IP."},
	{"fcrdns_temperror", SectionAuthentication, Info, 2, "Make sure the reverse DNS of the sending IP answers."},
	{"arc_unverified", SectionAuthentication, Info, 0, "Nothing to do: the ARC chain of a forwarder is reported but not verified."},
	{"tls_none", SectionAuthentication, Warning, 5, "Send with STARTTLS; the receiver offered it and the message crossed the network in clear text."},
	{"tls_outdated", SectionAuthentication, Warning, 3, "Upgrade the sending server to TLS 1.2 or 1.3."},
	{"ip_listed", SectionReputation, Error, 30, "Find and stop what got the IP listed, then request delisting from each list."},
	{"ip_listed_policy", SectionReputation, Warning, 5, "Send through your own authenticated relay or your ESP, not directly from an address range the list says should not send mail."},
	{"reputation_not_public", SectionReputation, Info, 0, "Nothing to do: a private or loopback address is on no public list."},
	{"reputation_partial", SectionReputation, Info, 0, "Nothing to do: the lists that did not answer are named, and the others were checked."},
	{"reputation_skipped", SectionReputation, Info, 0, "Nothing to do: no blocklist catalog was configured for this analysis."},
	{"reputation_error", SectionReputation, Info, 0, "Nothing to do: the blocklist check failed and is reported as unknown."},
	{"spam_score_high", SectionSpam, Error, 25, "Read the rules that fired, heaviest first, and change what triggers them: content filters would file this message as spam."},
	{"spam_score_elevated", SectionSpam, Warning, 5, "Read the rules that fired, heaviest first: the message is over half-way to the filter's spam threshold."},
	{"spam_skipped", SectionSpam, Info, 0, "Nothing to do: no content filter (SPAMD_ADDR or RSPAMD_URL) is configured for this analysis."},
	{"spam_not_scored", SectionSpam, Info, 0, "Nothing to do: the content filter could not score this message and it is reported as unknown."},
	{"from_missing", SectionHeaders, Error, 20, "Add exactly one From header with the sender's address."},
	{"from_multiple", SectionHeaders, Error, 20, "Send exactly one From header with one address."},
	{"from_invalid", SectionHeaders, Error, 15, "Write From as an RFC 5322 address, e.g. a display name and user@example.com in angle brackets."},
	{"message_id_missing", SectionHeaders, Warning, 5, "Add a Message-ID header: a unique id, @ and your domain, in angle brackets."},
	{"message_id_invalid", SectionHeaders, Warning, 5, "Write Message-ID as one id@domain in angle brackets (RFC 5322 section 3.6.4)."},
	{"date_missing", SectionHeaders, Warning, 5, "Add a Date header with the time of sending."},
	{"date_invalid", SectionHeaders, Warning, 5, "Write Date in RFC 5322 format, e.g. \"Mon, 02 Jan 2006 15:04:05 +0000\"."},
	{"mime_version_missing", SectionHeaders, Info, 2, "Add \"MIME-Version: 1.0\"."},
	{"list_unsubscribe_missing", SectionHeaders, Warning, 3, "Add List-Unsubscribe with an https URL (required of bulk senders by Gmail and Yahoo)."},
	{"list_unsubscribe_no_https", SectionHeaders, Warning, 3, "Put an https URL in List-Unsubscribe, in angle brackets, e.g. https://example.com/unsubscribe?id=..."},
	{"one_click_missing", SectionHeaders, Warning, 5, "Add \"List-Unsubscribe-Post: List-Unsubscribe=One-Click\" (RFC 8058) and accept POST on the https URL."},
	{"one_click_unsigned", SectionHeaders, Warning, 5, "Include List-Unsubscribe and List-Unsubscribe-Post in the h= of a DKIM signature that passes."},
	{"reply_without_thread", SectionHeaders, Warning, 3, "Do not start the subject with \"Re:\" unless the message replies to one (with In-Reply-To or References)."},
	{"headers_over_limit", SectionHeaders, Info, 0, "Nothing to do unless the message really carries that many header fields: only the first ones were examined."},
	{"message_too_large", SectionContent, Error, 15, "Send a smaller message: link to large files instead of attaching them."},
	{"message_large", SectionContent, Warning, 5, "Keep messages under 10 MB: link to large files instead of attaching them."},
	{"message_unparsable", SectionContent, Error, 20, "Fix the MIME structure of the message; its content could not be read within the bounds."},
	{"content_empty", SectionContent, Warning, 10, "Give the message a text or HTML body."},
	{"content_script", SectionContent, Error, 10, "Remove script elements; mail clients strip them and filters penalise them."},
	{"content_iframe", SectionContent, Warning, 5, "Remove iframe elements; link to the page instead."},
	{"content_object", SectionContent, Warning, 5, "Remove object elements."},
	{"content_embed", SectionContent, Warning, 5, "Remove embed elements."},
	{"content_image_no_alt", SectionContent, Info, 2, "Give every img element an alt attribute (empty for decorative images)."},
	{"content_placeholder", SectionContent, Error, 10, "Fill in the template: the message still carries an unreplaced placeholder."},
	{"content_link_mismatch", SectionContent, Error, 10, "Make the link text show the domain the link goes to, or use text that names no domain."},
	{"content_shortener", SectionContent, Warning, 5, "Link to your own domain instead of a public URL shortener."},
	{"content_text_missing", SectionContent, Warning, 3, "Send a text/plain alternative with the HTML part."},
	{"content_parts_disagree", SectionContent, Warning, 5, "Make the text/plain part say what the HTML part says."},
	{"content_html_clipped", SectionContent, Warning, 3, "Keep the HTML under 102 KB; Gmail clips longer messages and hides the rest."},
	{"content_over_limit", SectionContent, Info, 0, "Nothing to do unless the message is really that large: only part of the HTML was examined."},
}

// Grade thresholds: the lowest score of each grade. A score under the
// last threshold is an F.
var GradeThresholds = []struct {
	Grade    string
	MinScore int
}{
	{"A", 90},
	{"B", 80},
	{"C", 65},
	{"D", 50},
}

// weightByID indexes Weights.
var weightByID = func() map[string]Weight {
	m := make(map[string]Weight, len(Weights))
	for _, w := range Weights {
		m[w.ID] = w
	}
	return m
}()

// WeightOf returns the table row of a finding ID.
func WeightOf(id string) (Weight, bool) {
	w, ok := weightByID[id]
	return w, ok
}

// Score computes the score (0 to 100) and grade of a set of sections: 100
// minus the points of each distinct finding ID.
func Score(sections []Section) (int, string) {
	seen := map[string]bool{}
	score := 100
	for _, s := range sections {
		for _, f := range s.Findings {
			if seen[f.ID] {
				continue
			}
			seen[f.ID] = true
			score -= f.Points
		}
	}
	score = max(score, 0)
	for _, t := range GradeThresholds {
		if score >= t.MinScore {
			return score, t.Grade
		}
	}
	return score, "F"
}
