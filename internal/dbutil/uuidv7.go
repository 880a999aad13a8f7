package dbutil

import (
	"encoding/binary"
	"time"

	"github.com/google/uuid"
)

// UUIDv7Floor returns the smallest version 7 UUID of t's millisecond: every
// UUIDv7 made before t sorts below it, in Go and in Postgres (which compares
// uuids byte by byte), so "id < UUIDv7Floor(t)" selects the rows made
// before t by walking a primary key, with no timestamp index.
func UUIDv7Floor(t time.Time) uuid.UUID {
	var u uuid.UUID
	ms := uint64(max(t.UnixMilli(), 0))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ms)
	copy(u[0:6], b[2:8]) // 48-bit big-endian Unix milliseconds
	u[6] = 0x70          // version 7, rand_a zero
	u[8] = 0x80          // RFC 9562 variant, rand_b zero
	return u
}
