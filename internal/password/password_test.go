package password

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHashVerify(t *testing.T) {
	t.Parallel()

	h, err := Hash("correct horse battery")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$"))
	require.NotContains(t, h, "correct horse")
	require.NoError(t, Verify("correct horse battery", h))
	require.ErrorIs(t, Verify("correct horse batterx", h), ErrMismatch)

	h2, err := Hash("correct horse battery")
	require.NoError(t, err)
	require.NotEqual(t, h, h2, "salts must differ")

	require.Error(t, Verify("x", "$bcrypt$whatever"))
	require.Error(t, Verify("x", "$argon2id$v=19$m=1,t=1,p=1$!!$!!"))
}

func TestValidate(t *testing.T) {
	t.Parallel()

	require.NoError(t, Validate("12345678"))
	require.NoError(t, Validate(strings.Repeat("é", 256)))
	require.ErrorContains(t, Validate("1234567"), "at least 8")
	require.ErrorContains(t, Validate(strings.Repeat("a", 257)), "at most 256")
	require.ErrorContains(t, Validate("        "), "whitespace")
	require.ErrorContains(t, Validate("abcdefg\xff"), "UTF-8")
}
