package main

import (
	"fmt"

	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/mxprobe"
	"github.com/mailwatch/mailwatch/internal/transport"
)

// buildTransport returns the MX transport prober of the workers, or nil
// when SMTP_PROBE is off. Its dials go through the SSRF guard (MX records
// are user data); its EHLO name is the host customers' MX records point
// to for mailwatch's own inbound mail.
func buildTransport(cfg *config.Config, sh *shared) (*transport.Service, error) {
	if !cfg.SMTPProbe {
		return nil, nil
	}
	pc := mxprobe.Config{Resolver: sh.resolver, HeloName: cfg.InboundMXHost, Port: cfg.SMTPProbePort, AllowAddr: sh.guard.CheckIP}
	if pc.HeloName == "" {
		pc.HeloName = cfg.InboundDomain
	}
	if cfg.SMTPProbeCAFile != "" {
		pool, err := mxprobe.LoadCAFile(cfg.SMTPProbeCAFile)
		if err != nil {
			return nil, fmt.Errorf("SMTP_PROBE_CA_FILE: %w", err)
		}
		pc.ExtraRoots = pool
	}
	p, err := mxprobe.NewProber(pc)
	if err != nil {
		return nil, fmt.Errorf("SMTP_PROBE: %w", err)
	}
	return &transport.Service{Prober: p, Emitter: &events.Emitter{}}, nil
}
