package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// errNotFound marks a container or sandbox that is not running.
var errNotFound = errors.New("not found")

// streamOptions are the exec and attach query parameters (the kubelet's
// remotecommand server options).
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

func newStreamOptions(r *http.Request) (streamOptions, error) {
	q := r.URL.Query()
	// The API server passes the kubelet "1" for each stream it wants.
	o := streamOptions{
		tty:    q.Get("tty") == "1",
		stdin:  q.Get("input") == "1",
		stdout: q.Get("output") == "1",
		stderr: q.Get("error") == "1",
	}
	// A terminal has no separate stderr.
	if o.tty && o.stderr {
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

func (h *Handler) exec(w http.ResponseWriter, r *http.Request) {
	h.streamContainer(w, r, true)
}

func (h *Handler) attach(w http.ResponseWriter, r *http.Request) {
	h.streamContainer(w, r, false)
}

// streamContainer serves /exec and /attach as the kubelet does: find the
// running container, ask the runtime for a streaming URL, and proxy the
// upgraded connection to it.
func (h *Handler) streamContainer(w http.ResponseWriter, r *http.Request, exec bool) {
	opts, err := newStreamOptions(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	pod, ok := h.podByName(r.PathValue("namespace"), r.PathValue("pod"))
	if !ok {
		writeError(w, http.StatusNotFound, errors.New("pod does not exist"))
		return
	}
	name := r.PathValue("container")
	id, err := h.findContainer(r.Context(), pod, r.PathValue("uid"), name)
	if err != nil {
		writeStreamingError(w, err)
		return
	}
	var u string
	if exec {
		resp, err := h.opts.Streamer.Exec(r.Context(), &runtimeapi.ExecRequest{
			ContainerId: id, Cmd: r.URL.Query()["command"],
			Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr, Tty: opts.tty,
		})
		if err != nil {
			writeStreamingError(w, err)
			return
		}
		u = resp.GetUrl()
	} else {
		resp, err := h.opts.Streamer.Attach(r.Context(), &runtimeapi.AttachRequest{
			ContainerId: id, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr, Tty: opts.tty,
		})
		if err != nil {
			writeStreamingError(w, err)
			return
		}
		u = resp.GetUrl()
	}
	h.proxyStream(w, r, u)
}

// portForward serves /portForward as the kubelet does.
func (h *Handler) portForward(w http.ResponseWriter, r *http.Request) {
	ports, err := portForwardPorts(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	pod, ok := h.podByName(r.PathValue("namespace"), r.PathValue("pod"))
	if !ok {
		writeError(w, http.StatusNotFound, errors.New("pod does not exist"))
		return
	}
	if uid := r.PathValue("uid"); uid != "" && string(pod.UID) != uid {
		writeError(w, http.StatusNotFound, errors.New("pod not found"))
		return
	}
	sandboxes, err := h.opts.Runtime.ListPodSandbox(r.Context(), &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{labelPodUID: string(pod.UID)},
	})
	if err != nil {
		writeStreamingError(w, err)
		return
	}
	if len(sandboxes) == 0 {
		writeStreamingError(w, fmt.Errorf("pod not found (%q): %w", pod.Name+"_"+pod.Namespace, errNotFound))
		return
	}
	resp, err := h.opts.Streamer.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sandboxes[0].GetId(), Port: ports})
	if err != nil {
		writeStreamingError(w, err)
		return
	}
	h.proxyStream(w, r, resp.GetUrl())
}

// portForwardPorts reads the "port" query parameters: required by the
// WebSocket protocol, optional (sent as stream headers) with SPDY.
func portForwardPorts(r *http.Request) ([]int32, error) {
	var ports []int32
	for _, v := range r.URL.Query()["port"] {
		for _, s := range strings.Split(v, ",") {
			p, err := strconv.ParseUint(s, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("unable to parse %q as a port: %v", s, err)
			}
			if p < 1 {
				return nil, fmt.Errorf("port %q must be > 0", s)
			}
			ports = append(ports, int32(p))
		}
	}
	return ports, nil
}

// run serves POST /run: the command in the "cmd" query parameter, split
// at spaces, run to completion; its stdout and stderr are the body.
func (h *Handler) run(w http.ResponseWriter, r *http.Request) {
	pod, ok := h.podByName(r.PathValue("namespace"), r.PathValue("pod"))
	if !ok {
		writeError(w, http.StatusNotFound, errors.New("pod does not exist"))
		return
	}
	id, err := h.findContainer(r.Context(), pod, r.PathValue("uid"), r.PathValue("container"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	stdout, stderr, err := h.opts.Exec.ExecSync(r.Context(), id, cmd, 0)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, append(stdout, stderr...))
}

// findContainer returns the ID of the running container of that name in
// the pod (whose UID, when the path gives one, must match).
func (h *Handler) findContainer(ctx context.Context, pod *v1.Pod, uid, name string) (string, error) {
	if uid != "" && string(pod.UID) != uid {
		return "", fmt.Errorf("container not found (%q): %w", name, errNotFound)
	}
	cs, err := h.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{labelPodUID: string(pod.UID), labelContainerName: name},
	})
	if err != nil {
		return "", err
	}
	if len(cs) == 0 {
		return "", fmt.Errorf("container not found (%q): %w", name, errNotFound)
	}
	return cs[0].GetId(), nil
}

// writeStreamingError answers as the kubelet's streaming.WriteError: the
// gRPC code's HTTP status (404 for a missing container, 429 for too many
// sessions, 500 otherwise) and the error text.
func writeStreamingError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errNotFound), status.Code(err) == codes.NotFound:
		code = http.StatusNotFound
	case status.Code(err) == codes.ResourceExhausted:
		code = http.StatusTooManyRequests
	}
	writeError(w, code, err)
}

// proxyStream proxies the upgraded connection to the runtime's streaming
// URL with the upgrade-aware proxy, as the kubelet does.
func (h *Handler) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("runtime streaming URL %q: %w", rawURL, err))
		return
	}
	// A relative URL is the streaming server's path on this host.
	if u.Host == "" {
		u.Scheme, u.Host = "http", r.Host
	}
	p := proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{h})
	p.ServeHTTP(w, r)
}

type responder struct{ h *Handler }

func (r responder) Error(w http.ResponseWriter, req *http.Request, err error) {
	r.h.log.Error(err, "Error while proxying a stream", "path", req.URL.Path)
	writeError(w, http.StatusInternalServerError, err)
}

// CRIStreamer adapts a CRI gRPC client (such as the one
// runtime/cri.Client.RuntimeClient returns) to a Streamer.
func CRIStreamer(c runtimeapi.RuntimeServiceClient) Streamer { return criStreamer{c} }

type criStreamer struct {
	c runtimeapi.RuntimeServiceClient
}

func (s criStreamer) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return s.c.Exec(ctx, req, grpc.WaitForReady(false))
}

func (s criStreamer) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return s.c.Attach(ctx, req)
}

func (s criStreamer) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return s.c.PortForward(ctx, req)
}
