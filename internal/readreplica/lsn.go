package readreplica

import (
	"fmt"
	"strconv"
	"strings"
)

// pgLSN is a Postgres WAL position (pg_lsn), comparable as a number.
type pgLSN uint64

// Scan reads the text form "X/Y" (two hexadecimal halves).
func (l *pgLSN) Scan(src any) error {
	s, ok := src.(string)
	if !ok {
		return fmt.Errorf("pg_lsn: want text, got %T", src)
	}
	v, err := parseLSN(s)
	if err != nil {
		return err
	}
	*l = v
	return nil
}

func parseLSN(s string) (pgLSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("pg_lsn %q: no slash", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pg_lsn %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pg_lsn %q: %w", s, err)
	}
	return pgLSN(h<<32 | l), nil
}
