package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/internal/expansion"
	"github.com/nodekit/nodekit/podmodel"
)

// Type is a kind of probe: liveness, readiness or startup.
type Type string

// The probe types.
const (
	Liveness  Type = "liveness"
	Readiness Type = "readiness"
	Startup   Type = "startup"
)

// The kubelet's defaults of a probe's zero fields.
const (
	DefaultPeriod           = 10 * time.Second
	DefaultTimeout          = 1 * time.Second
	DefaultSuccessThreshold = 1
	DefaultFailureThreshold = 3
)

// DefaultUserAgent is the User-Agent of HTTP and gRPC probes: the kubelet's,
// for the Kubernetes minor release of the k8s.io/api module nodekit builds on.
const DefaultUserAgent = "kube-probe/1.37"

// maxOutput caps what a probe keeps of an HTTP response body or of the
// output of an exec probe, as the kubelet does.
const maxOutput = 10 << 10

// Request is one probe of one container. The Prober must not modify it.
type Request struct {
	// Type is the kind of probe.
	Type Type
	// Pod is the pod of the container.
	Pod *v1.Pod
	// PodStatus is the pod's latest status; its PodIP is the host of HTTP
	// (unless the probe names a host), TCP and gRPC probes.
	PodStatus *v1.PodStatus
	// Container is the probed container's spec.
	Container *v1.Container
	// ContainerID is the runtime's ID of the container, without the
	// "<runtime>://" prefix of v1.ContainerStatus.ContainerID: what exec
	// probes pass to ExecSync.
	ContainerID string
	// Probe is the probe to run, with the defaults of its zero fields
	// applied (timeoutSeconds 1, periodSeconds 10, thresholds 1 and 3).
	Probe *v1.Probe
}

// Timeout is the probe's timeoutSeconds as a duration (DefaultTimeout when
// not set).
func (r *Request) Timeout() time.Duration {
	if r.Probe == nil || r.Probe.TimeoutSeconds <= 0 {
		return DefaultTimeout
	}
	return time.Duration(r.Probe.TimeoutSeconds) * time.Second
}

// Prober runs one probe. It returns Success or Failure with a message (the
// command's output, the response body or why it failed) when the probe
// ran, and an error when it could not be run at all (a port name the
// container does not declare, a runtime that cannot exec): the Manager's
// workers retry such a probe up to three times, then ignore it and keep the
// previous result, as the kubelet does. An Unknown result without an error
// counts as a failure. It must honour ctx (the Manager cancels it when the
// pod is removed) and return within the probe's timeout. A Prober is called
// from many goroutines at once.
type Prober interface {
	Probe(ctx context.Context, req Request) (Result, string, error)
}

// ProberFunc adapts a function to a Prober.
type ProberFunc func(ctx context.Context, req Request) (Result, string, error)

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, req Request) (Result, string, error) {
	return f(ctx, req)
}

var _ Prober = ProberFunc(nil)

// Execer runs a command in a container: the ExecSync method of the CRI
// runtime service, so that runtime.RuntimeService, a CRI client and
// runtimetest.Runtime all satisfy it. A command that exits with a non-zero
// code returns an error that has an ExitStatus() int method (as
// k8s.io/utils/exec.CodeExitError, which the CRI client returns) or an
// ExitCode() int method (as *os/exec.ExitError). The call must return when
// ctx ends; ctx carries the probe's timeout as its deadline.
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// ExecerFunc adapts a function to an Execer.
type ExecerFunc func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)

// ExecSync calls f.
func (f ExecerFunc) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	return f(ctx, containerID, cmd, timeout)
}

// ProberOptions configure NewDefaultProber.
type ProberOptions struct {
	// Runtime runs exec probes. Defaults to nil: exec probes return an
	// error.
	Runtime Execer
	// UserAgent of HTTP and gRPC probes when the probe sets no User-Agent
	// header. Defaults to DefaultUserAgent.
	UserAgent string
	// Transport sends HTTP probes (through net/http's client, with the
	// kubelet's redirect policy). Defaults to one with the kubelet's
	// semantics: every probe opens its own connection (the probe dialer:
	// no TCP keep-alive, one-second linger) and closes it after the
	// response; no certificate verification for HTTPS probes; HTTP/1.1;
	// unlike the kubelet's, no proxy. It writes the request and reads the
	// response on the probing goroutine, without http.Transport's
	// connection pool and per-connection goroutines.
	Transport http.RoundTripper
}

func (o *ProberOptions) setDefaults() {
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.Transport == nil {
		o.Transport = newTransport()
	}
}

// DefaultProber runs the probes a Pod spec can declare: exec (through the
// runtime's ExecSync), HTTP GET, TCP socket and gRPC health. It is the
// Prober of a Manager whose Options.Prober is nil. It is safe for
// concurrent use and holds no goroutine.
type DefaultProber struct {
	opts   ProberOptions
	client *http.Client
}

var _ Prober = (*DefaultProber)(nil)

// NewDefaultProber returns a DefaultProber. It does no I/O.
func NewDefaultProber(opts ProberOptions) *DefaultProber {
	opts.setDefaults()
	return &DefaultProber{
		opts:   opts,
		client: &http.Client{Transport: opts.Transport, CheckRedirect: checkRedirect},
	}
}

// Probe runs the probe's handler (exec, httpGet, tcpSocket or grpc, the
// first one set) within the probe's timeout.
func (p *DefaultProber) Probe(ctx context.Context, req Request) (Result, string, error) {
	pr := req.Probe
	if pr == nil {
		return Unknown, "", errors.New("probe: no probe in the request")
	}
	switch {
	case pr.Exec != nil:
		return p.exec(ctx, &req)
	case pr.HTTPGet != nil:
		return p.http(ctx, &req)
	case pr.TCPSocket != nil:
		return p.tcp(ctx, &req)
	case pr.GRPC != nil:
		return p.grpc(ctx, &req)
	}
	return Unknown, "", fmt.Errorf("probe: %s probe of container %q has no handler", req.Type, containerName(&req))
}

func containerName(req *Request) string {
	if req.Container == nil {
		return ""
	}
	return req.Container.Name
}

// podHost is the pod IP probes default to.
func podHost(req *Request) (string, error) {
	if req.PodStatus != nil && req.PodStatus.PodIP != "" {
		return req.PodStatus.PodIP, nil
	}
	return "", fmt.Errorf("probe: %s probe of container %q: the pod has no IP", req.Type, containerName(req))
}

// resolvePort returns the port number of a probe's port: a number, the name
// of one of the container's ports, or a number written as a string.
func resolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	n, err := podmodel.ContainerPort(port, c)
	if err != nil {
		return n, fmt.Errorf("probe: %w", err)
	}
	return n, nil
}

// withDefaults returns a copy of p with the kubelet's defaults for its zero
// (or negative) period, timeout and thresholds.
func withDefaults(p *v1.Probe) *v1.Probe {
	c := *p
	if c.PeriodSeconds <= 0 {
		c.PeriodSeconds = int32(DefaultPeriod / time.Second)
	}
	if c.TimeoutSeconds <= 0 {
		c.TimeoutSeconds = int32(DefaultTimeout / time.Second)
	}
	if c.SuccessThreshold <= 0 {
		c.SuccessThreshold = DefaultSuccessThreshold
	}
	if c.FailureThreshold <= 0 {
		c.FailureThreshold = DefaultFailureThreshold
	}
	return &c
}

// expandStatic replaces the $(VAR) references of an exec probe's command
// by the container's plain environment values (a variable set from a
// source has the empty value), as the kubelet expands exec probe commands;
// $$ escapes a $ and an unknown reference is kept. Each element is bounded
// at expansion.MaxValueBytes and the command as a whole at
// expansion.MaxTotalBytes; past either, the error names the element.
func expandStatic(cmd []string, env []v1.EnvVar) ([]string, error) {
	vars := make(map[string]string, len(env))
	for _, e := range env { // the last definition wins
		vars[e.Name] = e.Value
	}
	lookup := expansion.Map(vars)
	budget := expansion.NewBudget("the probe's command", expansion.MaxTotalBytes)
	out := make([]string, len(cmd))
	for i, s := range cmd {
		v, err := budget.Expand(s, lookup, expansion.MaxValueBytes, 0)
		if err != nil {
			return nil, fmt.Errorf("exec probe command[%d]: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// dialer is the dialer of HTTP, TCP and gRPC probes: no TCP keep-alive
// (a probe connection lives for one request) and the kubelet's one-second
// linger.
func dialer(deadline time.Time) *net.Dialer {
	return &net.Dialer{Deadline: deadline, KeepAlive: -1, Control: lingerControl}
}
