package channels_test

import (
	"testing"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
