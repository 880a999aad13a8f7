package mxprobe

import (
	"context"
	"testing"
)

// BenchmarkProbe measures full probes of one host on loopback: address,
// TLSA and reverse DNS lookups, the SMTP conversation with STARTTLS and the
// certificate checks.
func BenchmarkProbe(b *testing.B) {
	_, r := startDNS(b)
	pki := newTestPKI(b)
	cert := pki.leaf(b, []string{"mx.valid.test"}, testNow.AddDate(0, 0, -1), testNow.AddDate(0, 1, 0), false)
	port, _ := startSMTP(b, &cert)
	p := newTestProber(b, r, port, pki.pool)
	for b.Loop() {
		if res := p.Probe(context.Background(), "mx.valid.test", nil); res.Verdict != VerdictOK {
			b.Fatalf("%+v", res.Problems)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "probes/s")
}
