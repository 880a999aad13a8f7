package dnscheck

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// benchZone returns zone text for n domains shaped like a typical
// well-configured sender: SPF with one include, DMARC, two DKIM selectors
// (one found by the probe), two MX hosts, MTA-STS and TLS-RPT records.
func benchZone(n int) string {
	var b strings.Builder
	b.WriteString("$TTL 300\n")
	b.WriteString("_spf.provider.bench. TXT \"v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 ~all\"\n")
	b.WriteString("mx1.provider.bench. A 192.0.2.10\nmx2.provider.bench. A 192.0.2.11\n")
	for i := range n {
		d := fmt.Sprintf("d%d.bench.", i)
		fmt.Fprintf(&b, "%s SOA ns.%s hostmaster.%s 1 7200 3600 1209600 300\n", d, d, d)
		fmt.Fprintf(&b, "%s TXT \"v=spf1 include:_spf.provider.bench mx -all\"\n", d)
		fmt.Fprintf(&b, "%s MX 10 mx1.provider.bench.\n%s MX 20 mx2.provider.bench.\n", d, d)
		fmt.Fprintf(&b, "_dmarc.%s TXT \"v=DMARC1; p=reject; rua=mailto:dmarc@%s\"\n", d, strings.TrimSuffix(d, "."))
		fmt.Fprintf(&b, "selector1._domainkey.%s TXT \"v=DKIM1; k=ed25519; p=d+nLbJ2hNdGhwjiSC/ex5+5OqAWWpNlHodnZIHApHTs=\"\n", d)
		fmt.Fprintf(&b, "_mta-sts.%s TXT \"v=STSv1; id=1\"\n", d)
		fmt.Fprintf(&b, "_smtp._tls.%s TXT \"v=TLSRPTv1; rua=mailto:tls@%s\"\n", d, strings.TrimSuffix(d, "."))
	}
	return b.String()
}

// BenchmarkCheckAll runs CheckAll over many domains served by the loopback
// DNS server, 32 domains at a time, and reports checks per second and DNS
// queries per domain, with the p50 and p99 latency of one domain's CheckAll.
func BenchmarkCheckAll(b *testing.B) {
	const domains = 1000
	srv, err := dnstest.NewServer(benchZone(domains))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	client := NewClient(srv.Addr(), time.Second)
	httpClient := &http.Client{Transport: policyTransport{}}

	const concurrency = 32
	b.ResetTimer()
	start := time.Now()
	q0 := srv.Queries()
	var next atomic.Int64
	var wg sync.WaitGroup
	durations := make([]time.Duration, b.N)
	for range concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				domain := fmt.Sprintf("d%d.bench", i%domains)
				t0 := time.Now()
				rs := CheckAll(context.Background(), domain, Options{Resolver: client, HTTPClient: httpClient, DKIMSelectors: []string{"selector1"}})
				durations[i] = time.Since(t0)
				if rs.SPF.Status != StatusPass || rs.MTASTS.Status != StatusPass {
					b.Errorf("%s: spf %s %q, mta-sts %s %q", domain, rs.SPF.Status, rs.SPF.Errors, rs.MTASTS.Status, rs.MTASTS.Errors)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "checks/s")
	b.ReportMetric(float64(srv.Queries()-q0)/float64(b.N), "queries/domain")
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "p99-ms")
}

// policyTransport serves a fixed MTA-STS policy.
type policyTransport struct{}

func (policyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body := "version: STSv1\nmode: enforce\nmx: *.provider.bench\nmax_age: 1209600\n"
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": []string{"text/plain"}},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    r,
	}, nil
}
