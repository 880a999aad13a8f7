package dbutil

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUID teaches a connection's type map to encode and scan
// google/uuid values as binary UUIDs. Without it pgx goes through
// uuid.UUID's database/sql Valuer and Scanner, a text round trip that made
// primary-key lookups measurably slower.
func registerUUID(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{wrapUUIDEncode}, m.TryWrapEncodePlanFuncs...)
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}

type uuidValue uuid.UUID

func (u uuidValue) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: u, Valid: true}, nil }

type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(uuidValue(value.(uuid.UUID)), buf)
}

func wrapUUIDEncode(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidEncodePlan{}, uuidValue(u), true
	}
	return nil, nil, false
}

// uuidCodec is pgx's UUID codec with a direct binary scan into
// uuid.UUID: pgx asks the codec for a scan plan before any wrapper, and the
// stock codec picks uuid.UUID's sql.Scanner (a string parse per value).
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return scanBinaryUUID{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type scanBinaryUUID struct{}

func (scanBinaryUUID) Scan(src []byte, dst any) error {
	if src == nil {
		return errors.New("cannot scan NULL into uuid.UUID")
	}
	if len(src) != 16 {
		return fmt.Errorf("invalid length for uuid: %d", len(src))
	}
	copy(dst.(*uuid.UUID)[:], src)
	return nil
}
