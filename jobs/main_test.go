package jobs

import (
	"testing"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// TestMain is shared by every test file of the package.
func TestMain(m *testing.M) { dbtest.Main(m) }
