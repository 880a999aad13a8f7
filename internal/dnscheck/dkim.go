package dnscheck

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// CommonDKIMSelectors returns the selectors probed when a domain's own are
// unknown: those of the large mailbox and sending providers and common
// defaults.
func CommonDKIMSelectors() []string {
	return []string{"google", "selector1", "selector2", "k1", "k2", "s1", "s2", "default", "mail", "dkim", "smtp", "mandrill"}
}

// maxDKIMRecordLength caps ParseDKIMKey's input; a 4096-bit RSA key record
// is about 800 characters.
const maxDKIMRecordLength = 8192

// DKIMKey is a parsed DKIM key record (RFC 6376 section 3.6.1).
type DKIMKey struct {
	// KeyType is k: "rsa" (default) or "ed25519" (RFC 8463).
	KeyType string `json:"key_type"`
	// Bits is the key size: the RSA modulus length, or 256 for Ed25519. 0
	// for a revoked key.
	Bits int `json:"bits,omitempty"`
	// Revoked is true when p is empty (RFC 6376 section 3.6.1).
	Revoked bool `json:"revoked,omitempty"`
	// Testing is true for t=y: receivers must not treat signatures
	// differently from unsigned mail.
	Testing bool `json:"testing,omitempty"`
	// HashAlgorithms is h, empty when any is allowed.
	HashAlgorithms []string `json:"hash_algorithms,omitempty"`
}

// ParseDKIMKey parses a DKIM key record and measures its key.
func ParseDKIMKey(s string) (*DKIMKey, error) {
	if len(s) > maxDKIMRecordLength {
		return nil, fmt.Errorf("record is longer than %d characters", maxDKIMRecordLength)
	}
	k := &DKIMKey{KeyType: "rsa"}
	seen := map[string]bool{}
	var p string
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not a tag=value pair", part)
		}
		name = strings.TrimSpace(name)
		value = strings.TrimSpace(value)
		if seen[name] {
			return nil, fmt.Errorf("tag %q appears more than once", name)
		}
		seen[name] = true
		switch name {
		case "v":
			// Section 3.6.1: if present, v must be first and "DKIM1".
			if i != 0 || value != "DKIM1" {
				return nil, errors.New("v must be the first tag and equal DKIM1")
			}
		case "k":
			k.KeyType = strings.ToLower(value)
			if k.KeyType != "rsa" && k.KeyType != "ed25519" {
				return nil, fmt.Errorf("unknown key type k=%s", value)
			}
		case "p":
			p = strings.Join(strings.Fields(value), "")
		case "t":
			for _, f := range strings.Split(value, ":") {
				if strings.TrimSpace(f) == "y" {
					k.Testing = true
				}
			}
		case "h":
			for _, h := range strings.Split(value, ":") {
				k.HashAlgorithms = append(k.HashAlgorithms, strings.ToLower(strings.TrimSpace(h)))
			}
		}
	}
	if !seen["p"] {
		return nil, errors.New("the p tag (public key) is missing")
	}
	if p == "" {
		k.Revoked = true
		return k, nil
	}
	der, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return nil, fmt.Errorf("the p tag is not valid base64: %w", err)
	}
	switch k.KeyType {
	case "ed25519":
		// RFC 8463 section 4.2: the raw 32-byte public key.
		if len(der) != 32 {
			return nil, fmt.Errorf("an Ed25519 key is 32 bytes, not %d", len(der))
		}
		k.Bits = 256
	default:
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			// Some publish a bare RSAPublicKey (PKCS #1) instead of
			// SubjectPublicKeyInfo; receivers commonly accept it.
			rsaPub, err2 := x509.ParsePKCS1PublicKey(der)
			if err2 != nil {
				return nil, fmt.Errorf("the p tag is not an RSA public key: %w", err)
			}
			pub = rsaPub
		}
		rsaPub, ok := pub.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("k=rsa but the key is a %T", pub)
		}
		k.Bits = rsaPub.N.BitLen()
	}
	return k, nil
}

// DKIMSelector is the outcome for one selector.
type DKIMSelector struct {
	Selector string `json:"selector"`
	// Name is <selector>._domainkey.<domain>.
	Name string `json:"name"`
	// Source is "configured" (given by the caller: set on the domain or
	// learned from reports) or "probe" (from CommonDKIMSelectors).
	Source string `json:"source"`
	// Status: pass, warn, fail (revoked or too short), permerror (bad
	// record), none (no record), temperror.
	Status string   `json:"status"`
	Key    *DKIMKey `json:"key,omitempty"`
	Record string   `json:"record,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// DKIMResult is the DKIM check's result with each selector found.
type DKIMResult struct {
	Result
	// Selectors has every configured selector and the probed ones that
	// have a record.
	Selectors []DKIMSelector `json:"selectors"`
}

// CheckDKIM looks up the DKIM keys of the configured selectors and, if
// probe is set, of CommonDKIMSelectors. A selector without record is not a
// failure: DKIM selectors cannot be listed, so "none found" is neutral.
// Status: pass or warn when a usable key exists; fail when only revoked or
// too-short keys exist; permerror when only malformed records exist;
// temperror when a lookup failed and no usable key was found; neutral
// otherwise.
func CheckDKIM(ctx context.Context, r Resolver, domain string, selectors []string, probe bool) *DKIMResult {
	res := &DKIMResult{}
	out := checkSelectors(ctx, r, domain, dkimJobs(selectors, probe))

	var t dkimTally
	for _, sel := range out {
		t.add(res, sel)
	}
	if t.probeFailures > 0 {
		t.temp++
		t.problems = append(t.problems, fmt.Sprintf("%d selector probes failed: %s", t.probeFailures, t.probeErr))
	}
	if t.usable > 0 {
		res.Warnings = append(res.Warnings, t.problems...)
	} else {
		res.Errors = append(res.Errors, t.problems...)
	}
	if res.Selectors == nil {
		res.Selectors = []DKIMSelector{}
	}
	switch {
	case t.usable > 0:
		res.Status = StatusPass
	case t.temp > 0:
		res.Status = StatusTemperror
	case t.bad > 0:
		res.Status = StatusFail
	case t.malformed > 0:
		res.Status = StatusPermerror
	default:
		res.Status = StatusNeutral
		res.instructf("No DKIM key was found at the selectors tried. Add the selector your provider signs with (the s= tag of the DKIM-Signature header) to the domain's selectors.")
	}
	res.finish()
	return res
}

// dkimJob is one selector to look up, and where it came from
// ("configured" or "probe").
type dkimJob struct{ selector, source string }

// dkimJobs returns the configured selectors, normalized and without
// duplicates, followed, if probe is set, by the common selectors not
// already configured.
func dkimJobs(selectors []string, probe bool) []dkimJob {
	var jobs []dkimJob
	seen := map[string]bool{}
	for _, s := range selectors {
		s = strings.ToLower(strings.TrimSpace(s))
		if s != "" && !seen[s] {
			seen[s] = true
			jobs = append(jobs, dkimJob{s, "configured"})
		}
	}
	if probe {
		for _, s := range CommonDKIMSelectors() {
			if !seen[s] {
				seen[s] = true
				jobs = append(jobs, dkimJob{s, "probe"})
			}
		}
	}
	return jobs
}

// checkSelectors looks up every job concurrently and returns the results
// in the jobs' order.
func checkSelectors(ctx context.Context, r Resolver, domain string, jobs []dkimJob) []DKIMSelector {
	out := make([]DKIMSelector, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			out[i] = checkSelector(ctx, r, domain, j.selector, j.source)
		})
	}
	wg.Wait()
	return out
}

// dkimTally counts the selectors' outcomes for CheckDKIM's status.
type dkimTally struct {
	usable, bad, malformed, temp int
	// problems are per-selector errors: errors, or warnings if a usable
	// key exists.
	problems      []string
	probeFailures int
	probeErr      string
}

// add records sel in res (selectors, records, warnings, instructions) and
// counts it.
func (t *dkimTally) add(res *DKIMResult, sel DKIMSelector) {
	if sel.Source == "probe" && sel.Status == StatusTemperror {
		// Not listed, but the lookups tell nothing: if no usable key is
		// found, the result is unknown rather than neutral.
		t.probeFailures++
		t.probeErr = sel.Error
		return
	}
	if sel.Source == "probe" && sel.Status == StatusNone {
		return
	}
	res.Selectors = append(res.Selectors, sel)
	if sel.Record != "" {
		res.Records = append(res.Records, sel.Selector+": "+sel.Record)
	}
	switch sel.Status {
	case StatusPass:
		t.usable++
	case StatusWarn:
		t.usable++
		if sel.Error != "" {
			res.warnf("selector %q: %s", sel.Selector, sel.Error)
		}
		if sel.Key.Testing {
			res.warnf("selector %q is in testing mode (t=y); receivers may treat its signatures as unsigned mail", sel.Selector)
		}
		if sel.Key.KeyType == "rsa" && sel.Key.Bits < 2048 {
			res.warnf("selector %q has a %d-bit RSA key; RFC 8301 recommends at least 2048 bits", sel.Selector, sel.Key.Bits)
			res.instructf("Rotate selector %q to a 2048-bit RSA key.", sel.Selector)
		}
	case StatusFail:
		t.bad++
		t.problems = append(t.problems, fmt.Sprintf("selector %q: %s", sel.Selector, sel.Error))
	case StatusPermerror:
		t.malformed++
		t.problems = append(t.problems, fmt.Sprintf("selector %q: %s", sel.Selector, sel.Error))
	case StatusTemperror:
		t.temp++
		t.problems = append(t.problems, fmt.Sprintf("selector %q: %s", sel.Selector, sel.Error))
	case StatusNone:
		res.warnf("configured selector %q has no key at %s", sel.Selector, sel.Name)
	}
}

func checkSelector(ctx context.Context, r Resolver, domain, selector, source string) DKIMSelector {
	sel := DKIMSelector{Selector: selector, Name: selector + "._domainkey." + domain, Source: source}
	txts, err := r.LookupTXT(ctx, sel.Name)
	switch {
	case IsNotFound(err):
		sel.Status = StatusNone
		return sel
	case err != nil:
		sel.Status = StatusTemperror
		sel.Error = err.Error()
		return sel
	}
	// RFC 6376 section 3.6.2.2: several TXT records make the result
	// undefined; use the first that parses and say so.
	slices.Sort(txts)
	sel.Record = txts[0]
	if len(txts) > 1 {
		sel.Error = fmt.Sprintf("%d TXT records at %s; publish exactly one", len(txts), sel.Name)
	}
	key, err := ParseDKIMKey(sel.Record)
	if err != nil {
		sel.Status = StatusPermerror
		sel.Error = "invalid key record: " + err.Error()
		return sel
	}
	sel.Key = key
	switch {
	case key.Revoked:
		sel.Status = StatusFail
		sel.Error = "the key is revoked (empty p=); mail signed with this selector fails DKIM"
	case key.KeyType == "rsa" && key.Bits < 1024:
		// RFC 8301 section 3.2: verifiers must not accept keys under 1024 bits.
		sel.Status = StatusFail
		sel.Error = fmt.Sprintf("the RSA key has %d bits; receivers reject keys under 1024 bits (RFC 8301)", key.Bits)
	case key.Testing || key.KeyType == "rsa" && key.Bits < 2048 || len(txts) > 1:
		sel.Status = StatusWarn
	default:
		sel.Status = StatusPass
	}
	return sel
}
