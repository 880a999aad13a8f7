package deliverability

import "time"

// Default limits. Each bounds work an outside sender controls.
const (
	// DefaultMaxMessageBytes is the largest message analysed at all (the
	// receivers' own limit); a larger one gets message_too_large and only
	// the session-level checks.
	DefaultMaxMessageBytes = 25 << 20
	// DefaultMaxHeaders is the most top-level header fields examined.
	DefaultMaxHeaders = 1000
	// DefaultMaxHeaderValueBytes truncates a header value.
	DefaultMaxHeaderValueBytes = 16 << 10
	// DefaultMaxDepth and DefaultMaxParts bound the MIME structure (checked
	// by mimelimit before enmime reads the message; parts past MaxParts are
	// ignored).
	DefaultMaxDepth = 20
	DefaultMaxParts = 200
	// DefaultMaxHTMLTokens is the most HTML tokens examined.
	DefaultMaxHTMLTokens = 200_000
	// DefaultMaxLinks is the most links (a href) examined.
	DefaultMaxLinks = 500
	// DefaultMaxWords is the most distinct words per part compared between
	// the text and HTML parts.
	DefaultMaxWords = 5000
	// DefaultMaxDKIMSignatures is the most DKIM-Signature headers verified;
	// the others get result policy.
	DefaultMaxDKIMSignatures = 5
	// DefaultMaxDNSLookups is the most DNS queries one analysis makes. SPF
	// alone may need 10 per identity plus 10 MX hosts (RFC 7208 section
	// 4.6.4); the rest get temperror.
	DefaultMaxDNSLookups = 60
	// DefaultLookupTimeout bounds each DNS lookup.
	DefaultLookupTimeout = 5 * time.Second
	// DefaultMaxPTRNames is the most PTR names tried for reverse DNS.
	DefaultMaxPTRNames = 10
)

// Limits bound one analysis. Zero fields take the defaults.
type Limits struct {
	MaxMessageBytes     int
	MaxHeaders          int
	MaxHeaderValueBytes int
	MaxDepth            int
	MaxParts            int
	MaxHTMLTokens       int
	MaxLinks            int
	MaxWords            int
	MaxDKIMSignatures   int
	MaxDNSLookups       int
	LookupTimeout       time.Duration
	MaxPTRNames         int
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{
		MaxMessageBytes:     DefaultMaxMessageBytes,
		MaxHeaders:          DefaultMaxHeaders,
		MaxHeaderValueBytes: DefaultMaxHeaderValueBytes,
		MaxDepth:            DefaultMaxDepth,
		MaxParts:            DefaultMaxParts,
		MaxHTMLTokens:       DefaultMaxHTMLTokens,
		MaxLinks:            DefaultMaxLinks,
		MaxWords:            DefaultMaxWords,
		MaxDKIMSignatures:   DefaultMaxDKIMSignatures,
		MaxDNSLookups:       DefaultMaxDNSLookups,
		LookupTimeout:       DefaultLookupTimeout,
		MaxPTRNames:         DefaultMaxPTRNames,
	}
}

// withDefaults returns lim with zero or negative fields set to the defaults.
func (lim Limits) withDefaults() Limits {
	def := DefaultLimits()
	pick := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	pick(&lim.MaxMessageBytes, def.MaxMessageBytes)
	pick(&lim.MaxHeaders, def.MaxHeaders)
	pick(&lim.MaxHeaderValueBytes, def.MaxHeaderValueBytes)
	pick(&lim.MaxDepth, def.MaxDepth)
	pick(&lim.MaxParts, def.MaxParts)
	pick(&lim.MaxHTMLTokens, def.MaxHTMLTokens)
	pick(&lim.MaxLinks, def.MaxLinks)
	pick(&lim.MaxWords, def.MaxWords)
	pick(&lim.MaxDKIMSignatures, def.MaxDKIMSignatures)
	pick(&lim.MaxDNSLookups, def.MaxDNSLookups)
	pick(&lim.MaxPTRNames, def.MaxPTRNames)
	if lim.LookupTimeout <= 0 {
		lim.LookupTimeout = def.LookupTimeout
	}
	return lim
}
