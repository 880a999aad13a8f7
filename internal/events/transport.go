package events

import "encoding/json"

// Transport probe events (internal/transport). They are registered from
// this file, apart from the table in registry.go, so that the transport
// slice adds to the registry without touching its shared lines.
const (
	TypeMXTLSFailing        = "mx_tls_failing"
	TypeCertificateExpiring = "certificate_expiring"
	TypeDANEMismatch        = "dane_mismatch"
)

func init() {
	types[TypeMXTLSFailing] = Type{
		Name:  TypeMXTLSFailing,
		Group: GroupHealth,
		Description: "A probe of one of the domain's MX hosts went from passing (or never probed) to failing: no STARTTLS, a failed " +
			"handshake, an untrusted, expired or wrongly named certificate, or an SMTP refusal. Critical when the domain's MTA-STS " +
			"mode is enforce or the host publishes DANE, since verifying senders then queue the mail; a warning otherwise.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["domain","mx_host","verdict","problems","mta_sts_mode","dane"],"properties":{
			"domain":{"type":"string"},"mx_host":{"type":"string"},"verdict":{"type":"string","enum":["tls_failing","smtp_failing"]},
			"problems":{"type":"array","items":{"type":"string"}},"mta_sts_mode":{"type":"string"},"dane":{"type":"boolean"},
			"addresses":{"type":"array","items":{"type":"string"}}}}`),
	}
	examples[TypeMXTLSFailing] = json.RawMessage(`{"domain":"example.com","mx_host":"mx1.example.com","verdict":"tls_failing",` +
		`"problems":["certificate_expired"],"mta_sts_mode":"enforce","dane":false,"addresses":["192.0.2.25"]}`)

	types[TypeCertificateExpiring] = Type{
		Name:  TypeCertificateExpiring,
		Group: GroupHealth,
		Description: "The certificate an MX host presents expires soon: a warning at 30 and 14 days left, critical at 7 (and once " +
			"expired). Raised once per threshold per certificate; a renewed certificate starts over.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["domain","mx_host","fingerprint","not_after","days_left","threshold"],"properties":{
			"domain":{"type":"string"},"mx_host":{"type":"string"},"fingerprint":{"type":"string"},
			"not_after":{"type":"string","format":"date-time"},"days_left":{"type":"integer"},
			"threshold":{"type":"integer","enum":[30,14,7]}}}`),
	}
	examples[TypeCertificateExpiring] = json.RawMessage(`{"domain":"example.com","mx_host":"mx1.example.com",` +
		`"fingerprint":"3f1c0a9e5b7d2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6","not_after":"2026-07-01T00:00:00Z",` +
		`"days_left":13,"threshold":14}`)

	types[TypeDANEMismatch] = Type{
		Name:  TypeDANEMismatch,
		Group: GroupHealth,
		Description: "An MX host publishes DANE (TLSA records under a DNSSEC-validated answer) but the certificate chain of one of " +
			"its addresses matches none of the usable records: DANE senders defer the mail until it does.",
		DefaultSeverity: SeverityCritical,
		PayloadSchema: schema(`{"type":"object","required":["domain","mx_host","addresses","records"],"properties":{
			"domain":{"type":"string"},"mx_host":{"type":"string"},"addresses":{"type":"array","items":{"type":"string"}},
			"records":{"type":"array","items":{"type":"string"}}}}`),
	}
	examples[TypeDANEMismatch] = json.RawMessage(`{"domain":"example.com","mx_host":"mx1.example.com","addresses":["192.0.2.25"],` +
		`"records":["3 1 1 0c72ac70b745ac19998811b131d662c9ac69dbdbe7cb23e5b514b56664c5d3d6"]}`)
}
