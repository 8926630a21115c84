package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Compile-time checks: Client is a complete nodekit runtime.
var (
	_ runtime.RuntimeService         = (*Client)(nil)
	_ runtime.ImageService           = (*Client)(nil)
	_ runtime.ContainerEventStreamer = (*Client)(nil)
)

// Defaults, as the kubelet's.
const (
	// DefaultEndpoint is containerd's CRI socket.
	DefaultEndpoint = "unix:///run/containerd/containerd.sock"
	// DefaultTimeout is the per-call timeout (the kubelet's
	// --runtime-request-timeout).
	DefaultTimeout = 2 * time.Minute
	// DefaultDialTimeout bounds New's wait for the runtime to answer.
	DefaultDialTimeout = 10 * time.Second
	// MaxMsgSize is the largest gRPC message sent or received, 16 MiB as
	// in the kubelet (a node with thousands of containers lists more than
	// gRPC's default 4 MiB).
	MaxMsgSize = 16 << 20
)

// The connection back-off, as the kubelet's CRI client: a runtime that
// restarts is reconnected within a few seconds, not after gRPC's default
// back-off of up to two minutes.
const (
	baseBackoffDelay  = 100 * time.Millisecond
	maxBackoffDelay   = 3 * time.Second
	minConnectTimeout = 5 * time.Second
)

// Opt configures a Client. Opts are for the transport and per-call
// knobs; each returns an error for an invalid value.
type Opt func(*clientOpts) error

type clientOpts struct {
	timeout     time.Duration
	dialTimeout time.Duration
	dialOpts    []grpc.DialOption // replaces the defaults when set
	replaceDial bool
	extraDial   []grpc.DialOption
	logger      logr.Logger
}

// WithTimeout sets the timeout of every call but PullImage (which has
// none, as in the kubelet), GetContainerEvents (a stream, bounded by its
// context) and ExecSync (its own timeout plus this one, leaving the runtime
// time to clean up). A context with an earlier deadline wins. It must be
// positive. Defaults to DefaultTimeout (2 minutes).
func WithTimeout(d time.Duration) Opt {
	return func(o *clientOpts) error {
		if d <= 0 {
			return fmt.Errorf("cri: WithTimeout must be positive, got %v", d)
		}
		o.timeout = d
		return nil
	}
}

// WithDialTimeout bounds how long New waits for the runtime to answer its
// version check; a runtime whose socket is not there yet is retried
// meanwhile. It must be positive. Defaults to DefaultDialTimeout (10 s).
func WithDialTimeout(d time.Duration) Opt {
	return func(o *clientOpts) error {
		if d <= 0 {
			return fmt.Errorf("cri: WithDialTimeout must be positive, got %v", d)
		}
		o.dialTimeout = d
		return nil
	}
}

// WithDialOptions replaces the gRPC dial options New uses (insecure
// transport credentials, 16 MiB message limits, the kubelet's connection
// back-off). Use it only to take full control of the connection;
// WithExtraDialOptions adds to the defaults instead. Ignored by
// NewFromConn.
func WithDialOptions(opts ...grpc.DialOption) Opt {
	return func(o *clientOpts) error {
		o.dialOpts = opts
		o.replaceDial = true
		return nil
	}
}

// WithExtraDialOptions appends gRPC dial options to the defaults (or to
// those of WithDialOptions), for example interceptors or keepalive
// parameters. Ignored by NewFromConn.
func WithExtraDialOptions(opts ...grpc.DialOption) Opt {
	return func(o *clientOpts) error {
		o.extraDial = append(o.extraDial, opts...)
		return nil
	}
}

// WithLogger sets the logger: the connection at info level, event streams
// at V(4). Errors are returned, not logged. Defaults to a logger that
// discards.
func WithLogger(l logr.Logger) Opt {
	return func(o *clientOpts) error {
		o.logger = l
		return nil
	}
}

// buildOpts applies the defaults and then opts, in order.
func buildOpts(opts []Opt) (clientOpts, error) {
	o := clientOpts{timeout: DefaultTimeout, dialTimeout: DefaultDialTimeout}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Client is a CRI client: nodekit's runtime.RuntimeService,
// runtime.ImageService and runtime.ContainerEventStreamer over gRPC, to
// containerd, CRI-O or any runtime serving the CRI v1 API. It is safe for
// concurrent use and lives until Close.
type Client struct {
	conn    *grpc.ClientConn
	ownConn bool // New dialed conn: Close closes it
	rc      runtimeapi.RuntimeServiceClient
	ic      runtimeapi.ImageServiceClient
	timeout time.Duration
	log     logr.Logger

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	version *runtimeapi.VersionResponse
}

// New connects to the CRI runtime at endpoint and checks that it serves
// the CRI v1 API (Version), waiting up to the dial timeout (10 s by
// default, WithDialTimeout) or until ctx ends for it to answer. endpoint
// is "unix:///path/to.sock" or an absolute socket path; empty means
// DefaultEndpoint. The Client must be closed.
func New(ctx context.Context, endpoint string, opts ...Opt) (*Client, error) {
	o, err := buildOpts(opts)
	if err != nil {
		return nil, err
	}
	target, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMsgSize),
			grpc.MaxCallSendMsgSize(MaxMsgSize),
		),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  baseBackoffDelay,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   maxBackoffDelay,
			},
			MinConnectTimeout: minConnectTimeout,
		}),
	}
	if o.replaceDial {
		dialOpts = o.dialOpts
	}
	dialOpts = append(dialOpts[:len(dialOpts):len(dialOpts)], o.extraDial...)
	conn, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("cri: connect to %s: %w", target, err)
	}
	c := newClient(conn, o)
	c.ownConn = true

	vctx, cancel := context.WithTimeout(ctx, o.dialTimeout)
	defer cancel()
	v, err := c.checkVersion(vctx, grpc.WaitForReady(true))
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("cri: connect to %s: %w", target, err)
	}
	c.log.Info("connected to container runtime", "endpoint", target,
		"runtimeName", v.GetRuntimeName(), "runtimeVersion", v.GetRuntimeVersion(),
		"runtimeAPIVersion", v.GetRuntimeApiVersion())
	return c, nil
}

// NewFromConn returns a Client on an existing connection, such as an
// in-process one in tests. It does no I/O: call CheckVersion to check the
// runtime. The caller keeps ownership of conn: Close does not close it.
func NewFromConn(conn *grpc.ClientConn, opts ...Opt) (*Client, error) {
	if conn == nil {
		return nil, errors.New("cri: NewFromConn needs a connection")
	}
	o, err := buildOpts(opts)
	if err != nil {
		return nil, err
	}
	return newClient(conn, o), nil
}

func newClient(conn *grpc.ClientConn, o clientOpts) *Client {
	return &Client{
		conn:    conn,
		rc:      runtimeapi.NewRuntimeServiceClient(conn),
		ic:      runtimeapi.NewImageServiceClient(conn),
		timeout: o.timeout,
		log:     o.logger.WithName("cri"),
	}
}

// parseEndpoint returns the gRPC target of a CRI endpoint.
func parseEndpoint(endpoint string) (string, error) {
	switch {
	case endpoint == "":
		return DefaultEndpoint, nil
	case strings.HasPrefix(endpoint, "unix://"):
		if strings.TrimPrefix(endpoint, "unix://") == "" {
			return "", fmt.Errorf("cri: endpoint %q has no socket path", endpoint)
		}
		return endpoint, nil
	case strings.HasPrefix(endpoint, "/"):
		return "unix://" + endpoint, nil
	default:
		return "", fmt.Errorf("cri: endpoint %q is not a unix socket (unix:///path or /path)", endpoint)
	}
}

// CheckVersion asks the runtime for its version (CRI Version) and returns
// an error when it does not serve the CRI v1 API: the call fails (a
// runtime serving only v1alpha2 answers Unimplemented) or the runtime
// reports an older API version. New calls it; clients made with
// NewFromConn may. The answer is kept for RuntimeVersion.
func (c *Client) CheckVersion(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	return c.checkVersion(ctx)
}

func (c *Client) checkVersion(ctx context.Context, callOpts ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	v, err := c.rc.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion}, callOpts...)
	if err != nil {
		err = wrap("Version", "", err)
		if errors.Is(err, runtime.ErrUnimplemented) {
			return nil, fmt.Errorf("cri: the runtime does not serve the CRI %s API: %w", apiVersion, err)
		}
		return nil, err
	}
	if !supportedAPIVersion(v.GetRuntimeApiVersion()) {
		return nil, fmt.Errorf("cri: runtime %s %s serves CRI API %q; nodekit needs %s: %w",
			v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion(), apiVersion, ErrUnsupportedVersion)
	}
	c.mu.Lock()
	c.version = v
	c.mu.Unlock()
	return v, nil
}

// apiVersion is the CRI API version the client speaks.
const apiVersion = "v1"

// ErrUnsupportedVersion is the class of version check failures where the
// runtime answered but reports an API version other than v1.
var ErrUnsupportedVersion = errors.New("cri: unsupported CRI API version")

// supportedAPIVersion accepts "v1" (and "", which some runtimes leave
// unset on the v1 service); it refuses the pre-v1 versions (v1alpha1,
// v1alpha2, v1beta…, 0.x).
func supportedAPIVersion(v string) bool {
	switch {
	case v == "" || v == apiVersion:
		return true
	case strings.HasPrefix(v, "v1alpha"), strings.HasPrefix(v, "v1beta"), strings.HasPrefix(v, "0."), strings.HasPrefix(v, "v0"):
		return false
	}
	// A later version (v2...) would come on a different gRPC service;
	// anything else answering on the v1 service speaks v1.
	return true
}

// RuntimeVersion returns the answer of the last successful version check
// (New's, or CheckVersion's), or nil.
func (c *Client) RuntimeVersion() *runtimeapi.VersionResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// RuntimeClient returns the generated CRI runtime client on the Client's
// connection, for the calls Client does not wrap (Exec, Attach, stats,
// RuntimeConfig, ...). Its errors are raw gRPC statuses and it applies no
// timeout.
func (c *Client) RuntimeClient() runtimeapi.RuntimeServiceClient { return c.rc }

// ImageClient returns the generated CRI image client on the Client's
// connection (ImageFsInfo, ...), like RuntimeClient.
func (c *Client) ImageClient() runtimeapi.ImageServiceClient { return c.ic }

// Close closes the connection when New made it (a NewFromConn client
// leaves its connection to the caller). Calls in progress fail with
// runtime.ErrUnavailable or a Canceled status. Close is idempotent: later
// calls return the first call's result.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		if c.ownConn {
			if err := c.conn.Close(); err != nil {
				c.closeErr = fmt.Errorf("cri: close: %w", err)
			}
		}
	})
	return c.closeErr
}

// callContext bounds a call by the per-call timeout; an earlier deadline
// of ctx wins.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}
