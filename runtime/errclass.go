package runtime

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNotFound is the class of "no such container or sandbox" errors.
// Implementations of RuntimeService may wrap it (or return a gRPC
// NotFound status) so their callers ignore objects removed meanwhile.
var ErrNotFound = errors.New("runtime: not found")

// IsNotFound reports whether err says the object does not exist: it wraps
// ErrNotFound, carries a gRPC NotFound status, or has a NotFound() bool
// method returning true.
func IsNotFound(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNotFound) {
		return true
	}
	var nf interface{ NotFound() bool }
	if errors.As(err, &nf) && nf.NotFound() {
		return true
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.NotFound {
		return true
	}
	return false
}

// The classes of transport failures a RuntimeService or ImageService
// reports, beside ErrNotFound. The CRI client (runtime/cri) wraps them
// around the gRPC status it receives, so callers test errors.Is(err,
// runtime.ErrUnavailable) without importing gRPC. The Is helpers also
// recognise a bare gRPC status, as returned by runtimetest and by other
// CRI implementations.
var (
	// ErrUnimplemented: the runtime does not implement the call (gRPC
	// Unimplemented), such as GetContainerEvents on containerd 1.6.
	ErrUnimplemented = errors.New("runtime: unimplemented")
	// ErrUnavailable: the runtime cannot be reached or is going away
	// (gRPC Unavailable). Retry later.
	ErrUnavailable = errors.New("runtime: unavailable")
	// ErrDeadlineExceeded: the call did not complete within its timeout
	// (gRPC DeadlineExceeded).
	ErrDeadlineExceeded = errors.New("runtime: deadline exceeded")
)

// IsUnimplemented reports whether err says the runtime does not implement
// the call: it wraps ErrUnimplemented or carries a gRPC Unimplemented
// status.
func IsUnimplemented(err error) bool {
	return isClass(err, ErrUnimplemented, codes.Unimplemented)
}

// IsUnavailable reports whether err says the runtime cannot be reached: it
// wraps ErrUnavailable or carries a gRPC Unavailable status.
func IsUnavailable(err error) bool {
	return isClass(err, ErrUnavailable, codes.Unavailable)
}

// IsDeadlineExceeded reports whether err says a call timed out: it wraps
// ErrDeadlineExceeded or context.DeadlineExceeded, or carries a gRPC
// DeadlineExceeded status.
func IsDeadlineExceeded(err error) bool {
	return isClass(err, ErrDeadlineExceeded, codes.DeadlineExceeded)
}

func isClass(err, class error, code codes.Code) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, class) {
		return true
	}
	if code == codes.DeadlineExceeded && errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if s, ok := status.FromError(err); ok && s.Code() == code {
		return true
	}
	return false
}
