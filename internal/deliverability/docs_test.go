package deliverability_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/deliverability"
)

// TestWeightsPublished keeps the published grading table and thresholds in
// docs/features/deliverability.md identical to the code's.
func TestWeightsPublished(t *testing.T) {
	doc, err := os.ReadFile("../../docs/features/deliverability.md")
	require.NoError(t, err)

	rowRE := regexp.MustCompile("^\\| `([a-z0-9_]+)` \\| ([a-z]+) \\| ([a-z]+) \\| ([0-9]+) \\| (.*) \\|$")
	gradeRE := regexp.MustCompile(`^\| ([A-F]) \| ([0-9]+) \|$`)
	var rows, grades []string
	for _, line := range strings.Split(string(doc), "\n") {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			rows = append(rows, strings.Join(m[1:], " / "))
		}
		if m := gradeRE.FindStringSubmatch(line); m != nil {
			grades = append(grades, m[1]+" "+m[2])
		}
	}
	var want, wantGrades []string
	for _, w := range deliverability.Weights {
		want = append(want, strings.Join([]string{w.ID, w.Section, string(w.Severity), strconv.Itoa(w.Points), w.Fix}, " / "))
	}
	for _, g := range deliverability.GradeThresholds {
		wantGrades = append(wantGrades, fmt.Sprintf("%s %d", g.Grade, g.MinScore))
	}
	require.Equal(t, want, rows, "the weight table of docs/features/deliverability.md differs from deliverability.Weights")
	require.Equal(t, wantGrades, grades, "the grade table of docs/features/deliverability.md differs from deliverability.GradeThresholds")
}

// TestWeightsTable checks the table's own consistency: unique ids, known
// sections, and points that match the severity (info costs at most 2).
func TestWeightsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range deliverability.Weights {
		require.False(t, seen[w.ID], "duplicate %s", w.ID)
		seen[w.ID] = true
		require.Contains(t, []string{deliverability.SectionAuthentication, deliverability.SectionReputation, deliverability.SectionSpam, deliverability.SectionHeaders, deliverability.SectionContent}, w.Section)
		require.NotEmpty(t, w.Fix)
		require.NotContains(t, w.Fix, "|")
		switch w.Severity {
		case deliverability.Info:
			require.LessOrEqual(t, w.Points, 2, w.ID)
		case deliverability.Warning, deliverability.Error:
			require.Positive(t, w.Points, w.ID)
		default:
			t.Fatalf("%s: unknown severity %q", w.ID, w.Severity)
		}
	}
	score, grade := deliverability.Score(nil)
	require.Equal(t, 100, score)
	require.Equal(t, "A", grade)
}

// Every assertion type is documented in the assertions table.
func TestAssertionTypesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/features/deliverability.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "## Assertions")
	require.True(t, ok)
	for _, typ := range deliverability.AssertionTypes {
		require.Contains(t, table, "`"+typ+"`", "assertion type %s is not documented", typ)
	}
}
