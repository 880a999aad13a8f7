// Package transport applies the SMTP transport probes of a domain's MX
// hosts (package mxprobe) to mailwatch's state: the stored results per
// (domain, MX host, address), the events raised on a change, the health
// cap, and the MTA-STS "safe to enforce" advice. The API, the River jobs and
// the dashboard are adapters over it.
//
// # Where the hosts come from
//
// The MX hosts and the MTA-STS policy (mode and mx patterns) are read from
// the domain's stored DNS check results, not looked up again: the probe
// judges the same MX set the DNS checks and the health score show. A null
// MX or a domain not yet checked has nothing to probe.
//
// # State and events
//
// A host whose probe is Temporary (port 25 unreachable, a timeout, a DNS
// failure) changes nothing: its stored rows, and so the transitions the
// events are computed from, stay as they were. A conclusive host replaces
// its rows in one transaction with the events it causes, so an event exists
// exactly when the change that caused it committed, and the transaction
// holds the domain's row lock while it reads the previous state, so two
// probes of one domain cannot both see the same transition.
//
// The health cap (HealthCap) reads the stored rows when the domain's score
// is computed: the probe job queues that recomputation once it stored
// conclusive results.
//
//   - mx_tls_failing: a host's verdict goes from ok (or never probed) to
//     tls_failing or smtp_failing. Critical when the domain's MTA-STS mode is
//     enforce or the host publishes DANE, since verifying senders then queue
//     the mail; a warning otherwise.
//   - dane_mismatch: a host with DANE published goes to having an address
//     whose chain matches no usable TLSA record.
//   - certificate_expiring: once per (domain, certificate fingerprint,
//     threshold) of mxprobe.ExpiryThresholds, recorded in
//     mx_certificate_notices, so a certificate found at 5 days left raises
//     the 7-day notice only, and a renewed certificate starts over.
//
// Hosts that are no longer MX hosts of the domain lose their rows when the
// stored MX check is conclusive.
//
// # Outbound connections
//
// MX records are user data. Every address is checked by the prober's
// AllowAddr hook before it is dialled (the process passes a netguard
// Guard's CheckIP), so a domain cannot point probes at internal services.
// SMTP_PROBE=off turns probing off: many clouds block outbound port 25, and
// there every probe would be Temporary anyway.
package transport
