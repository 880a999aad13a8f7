package dnscheck

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// maxBIMIRecordLength caps ParseBIMI's input.
const maxBIMIRecordLength = 2048

// BIMIRecord is a parsed BIMI assertion record
// (draft-brand-indicators-for-message-identification section 4.2).
type BIMIRecord struct {
	// Logo is l: the HTTPS URL of an SVG Tiny PS logo; empty declines BIMI.
	Logo string `json:"logo"`
	// Authority is a: the HTTPS URL of a mark certificate (VMC or CMC) in
	// PEM; empty when absent.
	Authority string `json:"authority,omitempty"`
}

// ParseBIMI parses a BIMI record: "v=BIMI1; l=<https url>; a=<https url>".
func ParseBIMI(s string) (*BIMIRecord, error) {
	if len(s) > maxBIMIRecordLength {
		return nil, fmt.Errorf("record is longer than %d characters", maxBIMIRecordLength)
	}
	fields, err := splitFields(s, "v", "BIMI1")
	if err != nil {
		return nil, err
	}
	rec := &BIMIRecord{}
	hasL := false
	for _, f := range fields {
		switch strings.ToLower(f.name) {
		case "l":
			hasL = true
			rec.Logo = f.value
			if f.value != "" {
				if err := checkHTTPS(f.value); err != nil {
					return nil, fmt.Errorf("l: %w", err)
				}
			}
		case "a":
			rec.Authority = f.value
			if f.value != "" {
				if err := checkHTTPS(f.value); err != nil {
					return nil, fmt.Errorf("a: %w", err)
				}
			}
		}
	}
	if !hasL {
		return nil, fmt.Errorf("the l field (logo URL) is missing")
	}
	return rec, nil
}

func checkHTTPS(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q must be an https:// URL", raw)
	}
	return nil
}

// BIMIResult is the BIMI check's result.
type BIMIResult struct {
	Result
	Logo      string `json:"logo,omitempty"`
	Authority string `json:"authority,omitempty"`
}

// CheckBIMI checks the shape of the domain's default BIMI record at
// default._bimi.<domain>. It does not fetch the logo or the certificate.
// CheckAll adds a warning when DMARC is not at enforcement, which BIMI
// requires. Status: pass, warn (no mark certificate, logo not SVG,
// declined), none, permerror, temperror.
func CheckBIMI(ctx context.Context, r Resolver, domain string) *BIMIResult {
	res := &BIMIResult{}
	defer res.finish()
	name := "default._bimi." + domain
	txts, err := r.LookupTXT(ctx, name)
	if IsTemporary(err) {
		res.Status = StatusTemperror
		res.errorf("looking up %s failed: %v", name, err)
		return res
	}
	for _, t := range txts {
		if strings.HasPrefix(t, "v=BIMI1") {
			res.Records = append(res.Records, t)
		}
	}
	switch len(res.Records) {
	case 0:
		res.Status = StatusNone
		res.errorf("no BIMI record at %s", name)
		res.instructf("Optional: with DMARC at p=quarantine or p=reject, publish \"v=BIMI1; l=https://.../logo.svg; a=https://.../vmc.pem\" at %s to show your logo in supporting mailboxes.", name)
		return res
	case 1:
	default:
		res.Status = StatusPermerror
		res.errorf("%s has %d BIMI records; publish exactly one", name, len(res.Records))
		return res
	}
	rec, err := ParseBIMI(res.Records[0])
	if err != nil {
		res.Status = StatusPermerror
		res.errorf("invalid BIMI record: %v", err)
		return res
	}
	res.Logo, res.Authority = rec.Logo, rec.Authority
	res.Status = StatusPass
	if rec.Logo == "" {
		res.warnf("the record declines BIMI (empty l=)")
		return res
	}
	if u, _ := url.Parse(rec.Logo); !strings.HasSuffix(strings.ToLower(u.Path), ".svg") {
		res.warnf("the logo %s does not end in .svg; BIMI requires an SVG Tiny PS image", rec.Logo)
	}
	if rec.Authority == "" {
		res.warnf("no a= mark certificate: Gmail and Apple Mail only show logos with a VMC or CMC")
		res.instructf("Obtain a Verified Mark Certificate (VMC) or Common Mark Certificate (CMC) and add its URL as a=.")
	}
	return res
}
