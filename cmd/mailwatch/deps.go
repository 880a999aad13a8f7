package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/reputation"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/webhook"
	"github.com/mailwatch/mailwatch/jobs"
)

// shared holds what the API and the workers both build from the config.
type shared struct {
	keyring  *secretbox.Keyring
	guard    *netguard.Guard
	resolver dnscheck.Resolver
	dnsFix   *domains.FixDeps
	// aws reaches AWS hosts only (SNS certificates and subscription
	// confirmations), through the SSRF guard: one client for the process.
	aws *http.Client
	// channelHosts is where notification channels may send
	// (CHANNEL_ALLOWED_HOSTS).
	channelHosts *channels.AllowList
}

func buildShared(cfg *config.Config) (*shared, error) {
	if err := cfg.Require("MAILWATCH_SECRET_KEY"); err != nil {
		return nil, err
	}
	keyring, err := secretbox.NewKeyring(cfg.SecretKey, cfg.PreviousSecretKeys...)
	if err != nil {
		return nil, fmt.Errorf("MAILWATCH_SECRET_KEY: %w", err)
	}
	guard, err := netguard.ParseGuard(cfg.WebhookAllowedCIDRs)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOK_ALLOWED_CIDRS: %w", err)
	}
	channelHosts, err := channels.ParseAllowedHosts(cfg.ChannelAllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("CHANNEL_ALLOWED_HOSTS: %w", err)
	}
	resolverAddr, err := dnscheck.ResolverAddress(cfg.DNSResolver)
	if err != nil {
		return nil, fmt.Errorf("DNS_RESOLVER: %w", err)
	}
	mxHost := cfg.InboundMXHost
	if mxHost == "" {
		mxHost = cfg.InboundDomain
	}
	return &shared{
		keyring: keyring, guard: guard, resolver: dnscheck.NewClient(resolverAddr, 3*time.Second), channelHosts: channelHosts,
		aws: ses.AWSOnlyClient(webhook.NewClient(guard, webhook.ClientOptions{})),
		dnsFix: &domains.FixDeps{
			Env: &dnsfix.Env{Keyring: keyring, Guard: guard}, MX: dnsfix.MXConfig{Host: mxHost},
			// The DMARC recommendation merges the signed rua address and
			// steps the policy up when the reports say it is safe.
			Inputs: domains.ReportInputs(keyring, cfg.InboundDomain, slog.Default()),
		},
	}, nil
}

func workerDeps(cfg *config.Config, logger *slog.Logger, pool *pgxpool.Pool, reg *prometheus.Registry) (jobs.Deps, error) {
	sh, err := buildShared(cfg)
	if err != nil {
		return jobs.Deps{}, err
	}
	relay, err := notify.ParseRelay(cfg.SMTPRelayURL)
	if err != nil {
		return jobs.Deps{}, err
	}
	tr, err := buildTransport(cfg, sh)
	if err != nil {
		return jobs.Deps{}, err
	}
	checker, err := blocklistChecker(cfg, logger)
	if err != nil {
		return jobs.Deps{}, err
	}
	return jobs.Deps{
		Transport: tr,
		Mail:      &notify.Mailer{Relay: relay, From: cfg.NotifyFrom, BaseURL: notify.BaseURL(cfg.PublicBaseURL, cfg.ListenAddr)},
		Pool:      pool,
		Logger:    logger,
		Settings:  jobs.SettingsFrom(cfg),
		Keyring:   sh.keyring,
		Resolver:  sh.resolver,
		Registry:  reg,
		DNSFix:    sh.dnsFix,
		WebhookClient: webhook.NewClient(sh.guard, webhook.ClientOptions{
			MaxIdleConnsPerHost: cfg.WebhookConcurrency,
		}),
		SNSClient:    sh.aws,
		Reputation:   checker,
		Spam:         spamChecker(cfg),
		ChannelHosts: sh.channelHosts,
	}, nil
}

// blocklistChecker builds the blocklist checker of the workers: the lists of
// BLOCKLIST_ZONES (or the catalog), queried through BLOCKLIST_RESOLVER (or
// DNS_RESOLVER) at blocklist.DefaultQueriesPerSecond per list. It warns
// when the resolver is a public one, which most lists refuse.
func blocklistChecker(cfg *config.Config, logger *slog.Logger) (*reputation.Checker, error) {
	lists, err := blocklist.Lists(cfg.BlocklistZones)
	if err != nil {
		return nil, fmt.Errorf("BLOCKLIST_ZONES: %w", err)
	}
	setting, name := cfg.BlocklistResolver, "BLOCKLIST_RESOLVER"
	if setting == "" {
		setting, name = cfg.DNSResolver, "DNS_RESOLVER"
	}
	addr, err := dnscheck.ResolverAddress(setting)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if blocklist.IsPublicResolver(addr) && logger != nil {
		logger.Warn("blocklist lookups go through a public DNS resolver, which most blocklists refuse (Spamhaus answers "+
			"127.255.255.254): set BLOCKLIST_RESOLVER to your own recursive resolver", slog.String("resolver", addr),
			slog.String("setting", name))
	}
	return &reputation.Checker{Resolver: dnscheck.NewClient(addr, 3*time.Second), Lists: lists,
		Limiter: blocklist.NewLimiter(blocklist.DefaultQueriesPerSecond, 1)}, nil
}
