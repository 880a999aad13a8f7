package corpus

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMissingCorpus runs a test that reads the corpus with MAILWATCH_CORPUS
// pointing nowhere: it is skipped with a line saying how to provide the
// samples, and fails once MAILWATCH_CORPUS_REQUIRED=1.
func TestMissingCorpus(t *testing.T) {
	if os.Getenv("CORPUS_CHILD") == "1" {
		Read(t, "dmarc/any.xml")
		t.Fatal("Read returned without the corpus")
	}
	run := func(required string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingCorpus$", "-test.v")
		cmd.Env = append(os.Environ(), "CORPUS_CHILD=1", "MAILWATCH_CORPUS="+t.TempDir()+"/absent", RequiredEnv+"="+required)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("")
	require.NoError(t, err, out)
	require.Contains(t, out, "--- SKIP")
	require.Contains(t, out, "MAILWATCH_CORPUS")

	out, err = run("1")
	require.Error(t, err, out)
	require.True(t, strings.Contains(out, "--- FAIL"), out)
}
