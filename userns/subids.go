package userns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
)

// KubeletUser is the user whose subordinate IDs (/etc/subuid and
// /etc/subgid, read with getsubids) are the node's ID range, as for the
// kubelet.
const KubeletUser = "kubelet"

// Range is a range of host IDs: Length IDs from First.
type Range struct {
	First  uint32
	Length uint32
}

// DefaultRange is the ID range of a node whose kubelet user has no
// subordinate IDs: every ID from idsPerPod (the IDs below it are the
// host's), the kubelet's default.
func DefaultRange(idsPerPod uint32) Range {
	return Range{First: idsPerPod, Length: uint32(1<<32 - uint64(idsPerPod))}
}

// subIDSource looks up the kubelet user's subordinate IDs; its fields
// are the system's in KubeletRange and fakes in tests.
type subIDSource struct {
	lookupUser func(name string) error
	lookPath   func(file string) (string, error)
	output     func(ctx context.Context, name string, args ...string) ([]byte, error)
}

func systemSubIDs() subIDSource {
	return subIDSource{
		lookupUser: func(name string) error { _, err := user.Lookup(name); return err },
		lookPath:   exec.LookPath,
		output: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).Output()
		},
	}
}

// KubeletRange returns the node's ID range as the kubelet's
// getKubeletMappings does: the single subordinate ID range of the
// "kubelet" user, the same for user and group IDs, that the getsubids
// tool reports; DefaultRange(idsPerPod) when there is no such user or no
// getsubids.
func KubeletRange(ctx context.Context, idsPerPod uint32) (Range, error) {
	return systemSubIDs().kubeletRange(ctx, idsPerPod)
}

func (s subIDSource) kubeletRange(ctx context.Context, idsPerPod uint32) (Range, error) {
	def := DefaultRange(idsPerPod)
	if err := s.lookupUser(KubeletUser); err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return def, nil
		}
		return Range{}, fmt.Errorf("userns: looking up user %q: %w", KubeletUser, err)
	}
	cmd, err := s.lookPath("getsubids")
	if err != nil {
		// The kubelet stops here when the tool is missing (it tests the
		// error with os.IsNotExist, which exec's ErrNotFound is not);
		// nodekit takes the default range, as the kubelet means to.
		if errors.Is(err, exec.ErrNotFound) {
			return def, nil
		}
		return Range{}, fmt.Errorf("userns: %w", err)
	}
	uids, err := s.output(ctx, cmd, KubeletUser)
	if err != nil {
		return Range{}, fmt.Errorf("userns: error retrieving additional ids for user %q: %w", KubeletUser, err)
	}
	gids, err := s.output(ctx, cmd, "-g", KubeletUser)
	if err != nil {
		return Range{}, fmt.Errorf("userns: error retrieving additional gids for user %q: %w", KubeletUser, err)
	}
	if !bytes.Equal(uids, gids) {
		return Range{}, fmt.Errorf("userns: mismatched subuids and subgids for user %q", KubeletUser)
	}
	return parseGetSubIDs(string(uids))
}

// parseGetSubIDs parses the output of getsubids: exactly one line such as
// "0: kubelet 65536 2147483648".
func parseGetSubIDs(out string) (Range, error) {
	lines := strings.Split(strings.Trim(out, "\n"), "\n")
	if len(lines) != 1 {
		return Range{}, fmt.Errorf("userns: error parsing line %q: it must contain only one line", out)
	}
	parts := strings.Fields(lines[0])
	if len(parts) != 4 {
		return Range{}, fmt.Errorf("userns: invalid line %q", out)
	}
	first, err := strconv.ParseUint(parts[2], 10, 32)
	if err != nil {
		return Range{}, fmt.Errorf("userns: error parsing line %q: %w", out, err)
	}
	length, err := strconv.ParseUint(parts[3], 10, 32)
	if err != nil {
		return Range{}, fmt.Errorf("userns: error parsing line %q: %w", out, err)
	}
	return Range{First: uint32(first), Length: uint32(length)}, nil
}
