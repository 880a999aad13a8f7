package deliverability

// Verdicts are the three authentication results a listing shows: one word
// each, as in an Authentication-Results header (RFC 8601).
type Verdicts struct {
	// SPF is the MAIL FROM identity's result: pass, fail, softfail,
	// neutral, none, temperror or permerror.
	SPF string `json:"spf"`
	// DKIM is pass when any signature verifies, none without a signature,
	// fail when a signature fails and none passes, otherwise the first
	// signature's result (temperror, permerror, neutral or policy).
	DKIM string `json:"dkim"`
	// DMARC is pass, fail, none, temperror or permerror.
	DMARC string `json:"dmarc"`
}

// Verdicts summarises the section's results.
func (a Authentication) Verdicts() Verdicts {
	return Verdicts{SPF: string(a.SPF.Status), DKIM: dkimVerdict(a.DKIM), DMARC: a.DMARC.Result}
}

func dkimVerdict(sigs []Signature) string {
	if len(sigs) == 0 {
		return ResultNone
	}
	failed := false
	for _, s := range sigs {
		if s.Result == ResultPass {
			return ResultPass
		}
		failed = failed || s.Result == ResultFail
	}
	if failed {
		return ResultFail
	}
	return sigs[0].Result
}
