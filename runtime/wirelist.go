package runtime

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WireLister is an optional capability of a RuntimeService: the answers of
// ListPodSandbox and ListContainers as the runtime sent them, in the
// protobuf wire encoding of runtime.v1.ListPodSandboxResponse and
// runtime.v1.ListContainersResponse, instead of decoded messages. A caller
// that needs a few fields of every sandbox and container (the relisting
// PLEG: IDs and states) reads them from the bytes, and does not pay for
// decoding every label and annotation into maps. Discover it with a type
// assertion.
//
// Each method appends the encoded response to buf[:0] (buf may be nil) and
// returns the result; the filter is that of the decoded call. The bytes
// are the caller's. A wrapper that implements the methods but cannot
// serve them (its runtime has no WireLister) returns an error wrapping
// ErrUnimplemented, and the caller uses the decoded calls.
type WireLister interface {
	ListPodSandboxWire(ctx context.Context, filter *runtimeapi.PodSandboxFilter, buf []byte) ([]byte, error)
	ListContainersWire(ctx context.Context, filter *runtimeapi.ContainerFilter, buf []byte) ([]byte, error)
}

// errNoWireLister is the error of a wrapper whose runtime has no
// WireLister.
func errNoWireLister(rs RuntimeService) error {
	return fmt.Errorf("runtime: %T lists only decoded messages: %w", rs, ErrUnimplemented)
}
