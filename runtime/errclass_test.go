package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestErrorClassHelpers(t *testing.T) {
	type want struct{ unimplemented, unavailable, deadline bool }
	tests := []struct {
		name string
		err  error
		want want
	}{
		{name: "nil"},
		{name: "plain", err: errors.New("x")},
		{name: "ErrUnimplemented wrapped", err: fmt.Errorf("a: %w", ErrUnimplemented), want: want{unimplemented: true}},
		{name: "ErrUnavailable wrapped", err: fmt.Errorf("a: %w", ErrUnavailable), want: want{unavailable: true}},
		{name: "ErrDeadlineExceeded wrapped", err: fmt.Errorf("a: %w", ErrDeadlineExceeded), want: want{deadline: true}},
		{name: "context deadline", err: fmt.Errorf("a: %w", context.DeadlineExceeded), want: want{deadline: true}},
		{name: "gRPC Unimplemented", err: status.Error(codes.Unimplemented, "x"), want: want{unimplemented: true}},
		{name: "gRPC Unavailable wrapped", err: fmt.Errorf("a: %w", status.Error(codes.Unavailable, "x")), want: want{unavailable: true}},
		{name: "gRPC DeadlineExceeded", err: status.Error(codes.DeadlineExceeded, "x"), want: want{deadline: true}},
		{name: "gRPC NotFound", err: status.Error(codes.NotFound, "x")},
		{name: "ErrNotFound", err: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := want{IsUnimplemented(tc.err), IsUnavailable(tc.err), IsDeadlineExceeded(tc.err)}
			if got != tc.want {
				t.Errorf("(IsUnimplemented, IsUnavailable, IsDeadlineExceeded)(%v) = %+v, want %+v", tc.err, got, tc.want)
			}
		})
	}
}
