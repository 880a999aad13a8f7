package main

import (
	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/spamcheck"
)

// spamChecker returns the content filter of the deliverability analysis:
// spamd (SPAMD_ADDR) or rspamd (RSPAMD_URL), or nil when neither is set
// (config refuses both).
func spamChecker(cfg *config.Config) spamcheck.Checker {
	switch {
	case cfg.SpamdAddr != "":
		return &spamcheck.Spamd{Addr: cfg.SpamdAddr}
	case cfg.RspamdURL != "":
		return &spamcheck.Rspamd{URL: cfg.RspamdURL, Password: cfg.RspamdPassword}
	}
	return nil
}
