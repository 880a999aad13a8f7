package dbutil

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestUUIDv7Floor(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	floor := UUIDv7Floor(t0.Add(999 * time.Microsecond))
	require.Equal(t, uuid.Version(7), floor.Version())
	require.Equal(t, uuid.RFC4122, floor.Variant())
	sec, nsec := floor.Time().UnixTime()
	require.Equal(t, t0, time.Unix(sec, nsec).UTC(), "the floor of t's millisecond")
	require.Equal(t, "01a20da4-4880-7000-8000-000000000000", UUIDv7Floor(t0).String(), "48-bit milliseconds (checked with Python), then version and variant")

	// An id made now sorts above the floor of a moment ago and below the
	// floor of a moment later (Postgres compares uuids the same way).
	before := UUIDv7Floor(time.Now().Add(-time.Millisecond))
	id := uuid.Must(uuid.NewV7())
	after := UUIDv7Floor(time.Now().Add(2 * time.Millisecond))
	require.Positive(t, bytes.Compare(id[:], before[:]))
	require.Negative(t, bytes.Compare(id[:], after[:]))
	a, b := UUIDv7Floor(t0), UUIDv7Floor(t0.Add(time.Millisecond))
	require.Negative(t, bytes.Compare(a[:], b[:]))
}
