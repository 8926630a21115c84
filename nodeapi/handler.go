package nodeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// PodLister lists the pods the agent manages (the kubelet's pod manager):
// /pods, and the pod a path names.
type PodLister interface {
	Pods() []*v1.Pod
}

// PodsFunc adapts a function to a PodLister.
type PodsFunc func() []*v1.Pod

// Pods calls f.
func (f PodsFunc) Pods() []*v1.Pod { return f() }

var _ PodLister = PodsFunc(nil)

// ContainerLogger writes a container's log. stdout or stderr is nil when
// that stream is not asked for. Its errors are answered with 400, as the
// kubelet's are. logs.Provider is the default.
type ContainerLogger interface {
	ContainerLogs(ctx context.Context, pod *v1.Pod, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error
}

// ContainerLogsFunc adapts a function to a ContainerLogger.
type ContainerLogsFunc func(ctx context.Context, pod *v1.Pod, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error

// ContainerLogs calls f.
func (f ContainerLogsFunc) ContainerLogs(ctx context.Context, pod *v1.Pod, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	return f(ctx, pod, container, opts, stdout, stderr)
}

// Runtime is the part of the container runtime the API reads: the
// running pods (/runningpods/), the running container a path names
// (/exec, /attach, /run) and the pod's sandbox (/portForward), and
// synchronous exec (/run). runtime.RuntimeService satisfies it.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// Streamer hands out streaming URLs for exec, attach and port-forward
// sessions (the CRI Exec, Attach and PortForward calls). The handler
// proxies the client's upgraded connection to the URL. CRIStreamer adapts
// a CRI gRPC client; StreamingServer serves them for a runtime without a
// streaming server of its own.
type Streamer interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// Execer runs a command in a container and returns its output (/run).
// runtime.RuntimeService satisfies it.
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout []byte, stderr []byte, err error)
}

// StatsProvider gives the node summary (/stats/summary). The stats
// package's Provider is the default.
type StatsProvider interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}

// HealthCheck is one named check of /healthz, also served alone at
// /healthz/NAME. A nil error is healthy.
type HealthCheck struct {
	Name  string
	Check func(r *http.Request) error
}

// Options configure a Handler. Only NodeName is required: a path whose
// part is missing answers 404, as a kubelet built without it would.
type Options struct {
	// NodeName is the Node the API speaks for: the name in authorization
	// checks. Required.
	NodeName string

	// Pods lists the pods of /pods and finds the pod a path names.
	Pods PodLister
	// Logs serves /containerLogs.
	Logs ContainerLogger
	// Runtime serves /runningpods/ and finds containers for /exec,
	// /attach, /portForward and /run.
	Runtime Runtime
	// Streamer serves /exec, /attach and /portForward; it needs Runtime.
	Streamer Streamer
	// Exec serves /run; it needs Runtime. Defaults to Runtime when that
	// has ExecSync.
	Exec Execer
	// Stats serves /stats/summary.
	Stats StatsProvider
	// Metrics serves /metrics: the agent's own registry, never the
	// process-wide one.
	Metrics prometheus.Gatherer
	// ResourceMetrics serves /metrics/resource (the metrics-server format).
	ResourceMetrics prometheus.Gatherer
	// ProbeMetrics serves /metrics/probes.
	ProbeMetrics prometheus.Gatherer
	// Configz serves /configz: the agent's effective configuration as
	// JSON, in the kubelet's form {"kubeletconfig": {...}}
	// (kubeletconfig.Settings.Configz). Called once per request.
	Configz func() ([]byte, error)
	// Spec serves /spec: the machine's description as JSON (the
	// kubelet's cAdvisor MachineInfo fields nodekit knows). Called once
	// per request.
	Spec func() ([]byte, error)
	// Health are the checks of /healthz beside "ping" and "log", which
	// always pass: the kubelet's are "syncloop" (and, here, "pleg").
	Health []HealthCheck

	// Auth authenticates and authorizes each request, as the kubelet
	// does. Nil serves every request unchecked: only for a handler behind
	// its own access control, or on a loopback read-only port.
	Auth *Auth

	// Logger receives request errors. Defaults to discarding.
	Logger logr.Logger
}

// Handler is the node's HTTP API, the kubelet's paths and query
// parameters served from the parts in Options. It is safe for concurrent
// use and holds no goroutine of its own.
type Handler struct {
	opts Options
	log  logr.Logger
	mux  *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// New returns the handler for opts.
func New(opts Options) (*Handler, error) {
	if opts.NodeName == "" {
		return nil, errors.New("nodeapi: Options.NodeName is required")
	}
	if opts.Streamer != nil && opts.Runtime == nil {
		return nil, errors.New("nodeapi: Options.Streamer needs Options.Runtime to find containers")
	}
	if opts.Exec == nil {
		if e, ok := opts.Runtime.(Execer); ok {
			opts.Exec = e
		}
	}
	h := &Handler{opts: opts, log: opts.Logger.WithName("nodeapi"), mux: http.NewServeMux()}
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("/healthz", h.healthz)
	m.HandleFunc("/healthz/{check}", h.healthzCheck)
	if h.opts.Pods != nil {
		m.HandleFunc("GET /pods", h.pods)
		m.HandleFunc("GET /pods/{$}", h.pods)
	}
	if h.opts.Runtime != nil {
		m.HandleFunc("GET /runningpods/{$}", h.runningPods)
	}
	if h.opts.Pods != nil && h.opts.Logs != nil {
		m.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", h.containerLogs)
	}
	if h.opts.Pods != nil && h.opts.Streamer != nil {
		for _, p := range []string{"/exec/{namespace}/{pod}/{container}", "/exec/{namespace}/{pod}/{uid}/{container}"} {
			m.HandleFunc("GET "+p, h.exec)
			m.HandleFunc("POST "+p, h.exec)
		}
		for _, p := range []string{"/attach/{namespace}/{pod}/{container}", "/attach/{namespace}/{pod}/{uid}/{container}"} {
			m.HandleFunc("GET "+p, h.attach)
			m.HandleFunc("POST "+p, h.attach)
		}
		for _, p := range []string{"/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"} {
			m.HandleFunc("GET "+p, h.portForward)
			m.HandleFunc("POST "+p, h.portForward)
		}
	}
	if h.opts.Pods != nil && h.opts.Runtime != nil && h.opts.Exec != nil {
		m.HandleFunc("POST /run/{namespace}/{pod}/{container}", h.run)
		m.HandleFunc("POST /run/{namespace}/{pod}/{uid}/{container}", h.run)
	}
	if h.opts.Stats != nil {
		m.HandleFunc("GET /stats/summary", h.summary)
		m.HandleFunc("POST /stats/summary", h.summary)
	}
	for path, f := range map[string]func() ([]byte, error){"/configz": h.opts.Configz, "/spec": h.opts.Spec} {
		if f != nil {
			m.HandleFunc("GET "+path+"/{$}", h.json(f))
			m.HandleFunc("GET "+path, h.json(f))
		}
	}
	for path, g := range map[string]prometheus.Gatherer{
		"/metrics":          h.opts.Metrics,
		"/metrics/resource": h.opts.ResourceMetrics,
		"/metrics/probes":   h.opts.ProbeMetrics,
	} {
		if g != nil {
			m.Handle("GET "+path, promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
		}
	}
}

// json serves the JSON document f returns.
func (h *Handler) json(f func() ([]byte, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := f()
		if err != nil {
			h.log.Error(err, "Cannot serve", "path", r.URL.Path)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}
}

// ServeHTTP authenticates and authorizes the request (with Options.Auth)
// and serves it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.opts.Auth != nil && !h.opts.Auth.filter(w, r, h.opts.NodeName, h.log) {
		return
	}
	// A path with "." or ".." segments or empty ones is answered 404,
	// never redirected to another resource.
	if p := r.URL.Path; p != "/" && path.Clean(p) != strings.TrimSuffix(p, "/") {
		http.NotFound(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// writeError answers as go-restful's WriteError does: the status and the
// error's text.
func writeError(w http.ResponseWriter, code int, err error) {
	writeText(w, code, err.Error())
}

// writeText answers code with text as the body, as go-restful's
// WriteErrorString does.
func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, text)
}

// writeJSON writes data with the JSON content type, as the kubelet's
// writeJSONResponse does.
func writeJSON(w http.ResponseWriter, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

func (h *Handler) encode(w http.ResponseWriter, path string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		h.log.Error(err, "Cannot encode the response", "path", path)
		writeError(w, http.StatusInternalServerError, fmt.Errorf("internal error: %w", err))
		return
	}
	writeJSON(w, data)
}

// podByName finds a pod the agent manages.
func (h *Handler) podByName(namespace, name string) (*v1.Pod, bool) {
	for _, p := range h.opts.Pods.Pods() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}
