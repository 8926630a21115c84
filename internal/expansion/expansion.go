// Package expansion expands $(VAR) references in container commands,
// arguments, environment values, subPathExpr and exec probe commands, as
// the kubelet does, within bounds.
//
// # Bounds
//
// A reference may name a variable whose value holds references itself, so
// a few variables in a small manifest can multiply into gigabytes ($(V1) is
// 1024 × $(V0), $(V2) is 256 × $(V1), ...). The kubelet expands without a
// limit; nodekit bounds every result, and Expand stops as soon as a result
// would cross its bound, before it builds the string:
//
//   - MaxValueBytes (1 MiB) for one string: an environment value, one
//     element of a command, of its args or of an exec probe's command. The
//     kernel's execve refuses any single argument or "NAME=value" string
//     longer than MAX_ARG_STRLEN (128 KiB), so no process can be given a
//     longer one; 1 MiB is also the size of the largest ConfigMap or
//     Secret the API server stores, so every value an object can hold fits.
//   - MaxTotalBytes (8 MiB) for a whole: a container's environment, its
//     command and args together, an exec probe's command. execve takes at
//     most a quarter of the stack limit for argv and envp together, and
//     never more than 6 MiB (three quarters of the kernel's 8 MiB stack
//     cap), so a bigger whole cannot start on Linux.
//   - MaxPathBytes (4096, PATH_MAX) for an expanded subPathExpr, which
//     names a path the kernel would refuse beyond that length.
//
// With these bounds, the strings one container's start holds stay in the
// tens of megabytes, whatever its manifest says.
//
// # Errors
//
// A result past its bound fails with an error matching ErrTooLong; the
// callers add the name of the variable or field.
package expansion

import (
	"errors"
	"fmt"
	"strings"
)

// The bounds of expanded strings (see the package doc for why).
const (
	// MaxValueBytes bounds one expanded string.
	MaxValueBytes = 1 << 20
	// MaxTotalBytes bounds a container's environment (the sum of its
	// "NAME=value" strings), its command and args together, and an exec
	// probe's command.
	MaxTotalBytes = 8 << 20
	// MaxPathBytes bounds an expanded subPathExpr.
	MaxPathBytes = 4096
)

// ErrTooLong is the class of the errors of a result past its bound.
var ErrTooLong = errors.New("too long")

// tooLong is the error of a result past max bytes.
func tooLong(max int) error {
	return fmt.Errorf("%w: more than %d bytes after $(VAR) expansion", ErrTooLong, max)
}

// Expand replaces each $(NAME) in s by lookup(NAME) when lookup knows NAME,
// and keeps the reference as written otherwise; $$ is an escaped $. The
// values are not expanded again. A result longer than max bytes fails with
// an error matching ErrTooLong as soon as the expansion crosses max: no
// more than max bytes are ever built.
func Expand(s string, lookup func(name string) (string, bool), max int) (string, error) {
	if !strings.Contains(s, "$") {
		if len(s) > max {
			return "", tooLong(max)
		}
		return s, nil
	}
	var b strings.Builder
	write := func(v string) bool {
		if len(v) > max-b.Len() {
			return false
		}
		b.WriteString(v)
		return true
	}
	for i := 0; i < len(s); i++ {
		piece := s[i : i+1]
		if s[i] == '$' && i+1 < len(s) {
			switch s[i+1] {
			case '$':
				i++
			case '(':
				end := strings.IndexByte(s[i+2:], ')')
				if end < 0 {
					piece = s[i:]
					i = len(s)
					break
				}
				piece = s[i : i+3+end]
				if v, ok := lookup(s[i+2 : i+2+end]); ok {
					piece = v
				}
				i += 2 + end
			}
		}
		if !write(piece) {
			return "", tooLong(max)
		}
	}
	return b.String(), nil
}

// Map returns a lookup in vars.
func Map(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// Budget counts the bytes of a whole (an environment, a command line)
// against a bound. A Budget is not safe for concurrent use.
type Budget struct {
	what      string
	max, used int
}

// NewBudget returns a Budget of max bytes for the whole that what names
// ("the environment"), which its errors name.
func NewBudget(what string, max int) *Budget { return &Budget{what: what, max: max} }

// Expand expands s as Expand does, within max bytes for the string and
// what is left of the Budget for the string and extra bytes (the "NAME="
// of an environment variable), and counts both. It fails with an error
// matching ErrTooLong as soon as either bound is crossed.
func (b *Budget) Expand(s string, lookup func(name string) (string, bool), max, extra int) (string, error) {
	lim := min(max, b.max-b.used-extra)
	if lim < 0 {
		return "", b.tooLong()
	}
	v, err := Expand(s, lookup, lim)
	if err != nil {
		if lim < max {
			return "", b.tooLong()
		}
		return "", err
	}
	b.used += len(v) + extra
	return v, nil
}

// Take counts n bytes of a part that is not expanded, or fails with an
// error matching ErrTooLong when they do not fit in what is left.
func (b *Budget) Take(n int) error {
	if n > b.max-b.used {
		return b.tooLong()
	}
	b.used += n
	return nil
}

// Give returns n bytes to the Budget (those of a value that was replaced).
func (b *Budget) Give(n int) { b.used -= n }

func (b *Budget) tooLong() error {
	return fmt.Errorf("%w: %s would exceed %d bytes", ErrTooLong, b.what, b.max)
}
