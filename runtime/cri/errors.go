package cri

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodekit/nodekit/runtime"
)

// Error is a failed CRI call: the method, the object it concerned, and the
// gRPC status the runtime answered. It belongs (errors.Is) to the class of
// its code: runtime.ErrNotFound, runtime.ErrUnimplemented,
// runtime.ErrUnavailable or runtime.ErrDeadlineExceeded (and
// context.DeadlineExceeded), or context.Canceled for a Canceled status.
// status.FromError and status.Code still find the gRPC status through its
// GRPCStatus method.
type Error struct {
	// Method is the CRI method ("ContainerStatus").
	Method string
	// ID is the sandbox, container or image the call concerned; may be
	// empty.
	ID string
	// Status is the gRPC status of the answer.
	Status *status.Status
	class  error
}

// wrap turns the error of a gRPC call into an *Error; nil stays nil and
// an error that carries no gRPC status is wrapped as is.
func wrap(method, id string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		if id == "" {
			return fmt.Errorf("cri: %s: %w", method, err)
		}
		return fmt.Errorf("cri: %s %s: %w", method, id, err)
	}
	return &Error{Method: method, ID: id, Status: st, class: classOf(st.Code())}
}

// classOf returns the runtime error class of a gRPC code, or nil.
func classOf(code codes.Code) error {
	switch code {
	case codes.NotFound:
		return runtime.ErrNotFound
	case codes.Unimplemented:
		return runtime.ErrUnimplemented
	case codes.Unavailable:
		return runtime.ErrUnavailable
	case codes.DeadlineExceeded:
		return runtime.ErrDeadlineExceeded
	case codes.Canceled:
		return context.Canceled
	}
	return nil
}

// Error returns "cri: METHOD ID: CLASS: MESSAGE"; for codes without a
// class, the code's name stands in for the class.
func (e *Error) Error() string {
	what := e.Method
	if e.ID != "" {
		what += " " + e.ID
	}
	class := e.Status.Code().String()
	if e.class != nil {
		class = e.class.Error()
	}
	return fmt.Sprintf("cri: %s: %s: %s", what, class, e.Status.Message())
}

// Unwrap returns the error's class (and context.DeadlineExceeded for a
// DeadlineExceeded status), for errors.Is.
func (e *Error) Unwrap() []error {
	switch {
	case e.class == nil:
		return nil
	case e.class == runtime.ErrDeadlineExceeded:
		return []error{e.class, context.DeadlineExceeded}
	}
	return []error{e.class}
}

// GRPCStatus returns the status the runtime answered, so that
// status.FromError(err) and status.Code(err) see the original code and
// message.
func (e *Error) GRPCStatus() *status.Status { return e.Status }

// NotFound reports whether the runtime answered NotFound (the interface
// runtime.IsNotFound also recognises).
func (e *Error) NotFound() bool { return e.Status.Code() == codes.NotFound }

var _ interface{ GRPCStatus() *status.Status } = (*Error)(nil)

// errNilResponse is returned when the runtime answers a call with an
// empty message where the CRI requires content.
var errNilResponse = errors.New("cri: the runtime answered with an empty response")
