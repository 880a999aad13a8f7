package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/logthrottle"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/secretbox"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/jobs"
)

// runSMTP runs the inbound SMTP listener (and /healthz, /readyz, /metrics on
// METRICS_ADDR) until ctx ends.
func runSMTP(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	logStart(logger, cfg, "smtp")
	riverClient, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: logger}, jobs.Options{})
	if err != nil {
		return err
	}
	srv, err := newSMTPServer(cfg, logger, pool, riverClient)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), api.NewPoolCollector(pool))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveSMTP(gctx, cfg, logger, srv) })
	g.Go(func() error { return serveOps(gctx, cfg.MetricsAddr, pool, reg, logger) })
	return g.Wait()
}

// newSMTPServer builds the listener over the Postgres receiver store, with
// the signed reporting addresses in front of it.
func newSMTPServer(cfg *config.Config, logger *slog.Logger, pool *pgxpool.Pool, riverClient *river.Client[pgx.Tx]) (*smtpd.Server, error) {
	var tlsConfig *tls.Config
	if cfg.SMTPTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.SMTPTLSCert, cfg.SMTPTLSKey)
		if err != nil {
			return nil, fmt.Errorf("error loading SMTP_TLS_CERT / SMTP_TLS_KEY: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var store smtpd.Store = &receivers.Store{DB: boundedDB(cfg, pool), Emitter: &events.Emitter{River: riverClient}, Logger: logger}
	if len(cfg.SecretKey) > 0 {
		// Reporting addresses (dmarc+..., tlsrpt+...) are verified with the
		// secret key; without one, they are unknown recipients like any other.
		keyring, err := secretbox.NewKeyring(cfg.SecretKey, cfg.PreviousSecretKeys...)
		if err != nil {
			return nil, fmt.Errorf("MAILWATCH_SECRET_KEY: %w", err)
		}
		store = &reports.SMTPStore{Next: store, Reports: &reports.Service{
			DB: boundedDB(cfg, pool), River: riverClient, Logger: logger,
			Signer: &reports.Signer{Keyring: keyring, Domain: cfg.InboundDomain},
		}}
	}
	// A lost or frozen database answers 451 (the sender retries); the outage
	// is logged once at warn and the recovery once at info, and the
	// sessions' own error lines are throttled like River's.
	store = &outageStore{next: store, outage: api.NewOutageLog(logger, "answering 451 to mail",
		func(ctx context.Context) error { return pool.Ping(ctx) })}
	return smtpd.NewServer(smtpd.Config{
		Addr:   cfg.SMTPAddr,
		Domain: cfg.InboundDomain,
		// A customer's verified inbound subdomain (MX setup) is accepted
		// too; the stores then decide which of its recipients exist.
		AcceptDomain: func(ctx context.Context, domain string) (bool, error) {
			return dnsfix.IsVerifiedInbound(ctx, boundedDB(cfg, pool), domain)
		},
		MaxMessageBytes:     cfg.SMTPMaxMessageBytes,
		TLSConfig:           tlsConfig,
		MaxConnections:      cfg.SMTPMaxConnections,
		MaxConnectionsPerIP: cfg.SMTPMaxConnectionsPerIP,
		SessionTimeout:      cfg.SMTPSessionTimeout,
	}, store, logthrottle.Logger(logger, 30*time.Second))
}

// outageStore records the store's database failures in the outage log.
type outageStore struct {
	next   smtpd.Store
	outage *api.OutageLog
}

func (s *outageStore) AcceptRecipient(ctx context.Context, address string) error {
	err := s.next.AcceptRecipient(ctx, address)
	s.outage.Observe(err)
	return err
}

func (s *outageStore) Deliver(ctx context.Context, env smtpd.Envelope) error {
	err := s.next.Deliver(ctx, env)
	s.outage.Observe(err)
	return err
}

// serveSMTP serves until ctx ends, then lets open sessions finish for up to
// SHUTDOWN_TIMEOUT.
func serveSMTP(ctx context.Context, cfg *config.Config, logger *slog.Logger, srv *smtpd.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("SMTP listener shutting down; waiting for open sessions")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), min(cfg.ShutdownTimeout, 30*time.Second))
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("SMTP sessions cut off at shutdown", slog.Any("error", err))
	}
	return <-errc
}
