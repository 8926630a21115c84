package podruntime

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

// ErrPostStartHook: the container's postStart hook failed; the container
// was killed. Its waiting reason is PostStartHookError.
var ErrPostStartHook = errors.New("runtime: PostStartHookError")

// The reasons of the hook events, the kubelet's.
const (
	// EventFailedPostStartHook (Warning): "PostStartHook failed"; the
	// container is killed.
	EventFailedPostStartHook = "FailedPostStartHook"
	// EventFailedPreStopHook (Warning): "PreStopHook failed"; the container
	// is stopped all the same.
	EventFailedPreStopHook = "FailedPreStopHook"
)

// killPostStartHook is why a container whose postStart hook failed is
// killed.
const killPostStartHook killReason = "FailedPostStartHook"

// hookUserAgent is the User-Agent of httpGet hooks, as the kubelet's
// ("kube-lifecycle/<major>.<minor>").
const hookUserAgent = "kube-lifecycle/1.37"

// runHook runs one lifecycle handler of container c (runtime ID id) of
// pod, as the kubelet's handler runner: exec through ExecSync (no
// timeout), httpGet against the pod's IP (or the handler's host), sleep.
// It returns the kubelet's message on failure. ctx bounds it.
func (m *Manager) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, h *v1.LifecycleHandler, podIPs []string) (string, error) {
	switch {
	case h.Exec != nil:
		stdout, stderr, err := m.rs.ExecSync(ctx, id, h.Exec.Command, 0)
		if err != nil {
			out := append(append([]byte(nil), stdout...), stderr...)
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, c.Name, podFullName(pod), err, string(out)), err
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := m.runHTTPHook(ctx, c, h.HTTPGet, podIPs); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				h.HTTPGet.Path, c.Name, podFullName(pod), err), err
		}
		return "", nil
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return "", nil
		case <-ctx.Done():
			err := errors.New("container terminated before sleep hook finished")
			return err.Error(), err
		}
	case h.TCPSocket != nil:
		// Deprecated and accepted by the API server, but never run by the
		// kubelet.
		return "", nil
	}
	err := errors.New("cannot run handler: unknown handler type")
	return err.Error(), err
}

// runHTTPHook sends the hook's GET. As the kubelet, only a failure to get
// a response fails it (the status code is not checked), and an https hook
// whose server speaks plain HTTP is retried over http.
func (m *Manager) runHTTPHook(ctx context.Context, c *v1.Container, g *v1.HTTPGetAction, podIPs []string) error {
	host := g.Host
	if host == "" {
		if len(podIPs) == 0 {
			return errors.New("failed to find networking container: the pod has no IP")
		}
		host = podIPs[0]
	}
	port, err := podmodel.ContainerPort(g.Port, c)
	if err != nil {
		return err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return err
	}
	do := func(u *url.URL) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		for _, h := range g.HTTPHeaders {
			if strings.EqualFold(h.Name, "Host") {
				req.Host = h.Value
				continue
			}
			req.Header.Add(h.Name, h.Value)
		}
		if req.Header.Get("User-Agent") == "" {
			req.Header.Set("User-Agent", hookUserAgent)
		}
		if req.Header.Get("Accept") == "" {
			req.Header.Set("Accept", "*/*")
		}
		resp, err := m.hookClient.Do(req)
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
			_ = resp.Body.Close()
		}
		return err
	}
	err = do(u)
	if err != nil && u.Scheme == "https" && errors.As(err, new(tls.RecordHeaderError)) {
		u.Scheme = "http"
		err = do(u)
	}
	return err
}

// newHookClient is the HTTP client of httpGet hooks: no proxy, no
// certificate checks (the kubelet's), no redirects beyond the standard
// ten, and no keep-alive (each hook is one request).
func newHookClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:             nil,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's hooks do not verify either
		DisableKeepAlives: true,
	}}
}

// postStart runs the container's postStart hook, if any, after it
// started. On failure it records FailedPostStartHook, kills the container
// and returns an ErrPostStartHook error with the hook's message.
func (m *Manager) postStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, podIPs []string) (string, error) {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return "", nil
	}
	msg, err := m.runHook(ctx, pod, c, id, c.Lifecycle.PostStart, podIPs)
	if err == nil {
		return "", nil
	}
	m.log.Error(err, "Failed to execute PostStartHook", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "container", c.Name, "containerID", id)
	// As the kubelet, the event does not carry the message, which may hold
	// secrets.
	m.ev.container(pod, c, id, v1.EventTypeWarning, EventFailedPostStartHook, "PostStartHook failed")
	if kerr := m.stopContainer(ctx, pod, id, c, killPostStartHook, "FailedPostStartHook", nil, nil); kerr != nil {
		m.log.Error(kerr, "Failed to kill container after its postStart hook failed", "pod", pod.Namespace+"/"+pod.Name, "containerID", id)
	}
	return msg, fmt.Errorf("%w: %s", ErrPostStartHook, msg)
}

// preStop runs the container's preStop hook within grace seconds, and
// returns the whole seconds it took (the kubelet's accounting: they are
// deducted from the grace period). A hook that outlives the grace period
// is cancelled. Failures record FailedPreStopHook.
func (m *Manager) preStop(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, grace int64) int64 {
	start := time.Now()
	hookCtx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
	defer cancel()
	var podIPs []string
	if h := c.Lifecycle.PreStop; h.HTTPGet != nil && h.HTTPGet.Host == "" {
		if st, err := m.GetPodStatus(hookCtx, pod.UID, pod.Name, pod.Namespace); err == nil {
			podIPs = st.IPs
		}
	}
	if _, err := m.runHook(hookCtx, pod, c, id, c.Lifecycle.PreStop, podIPs); err != nil {
		if hookCtx.Err() != nil && ctx.Err() == nil {
			m.log.V(2).Info("PreStop hook not completed in grace period", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "gracePeriod", grace)
		} else {
			m.log.Error(err, "PreStop hook failed", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "container", c.Name, "containerID", id)
			m.ev.container(pod, c, id, v1.EventTypeWarning, EventFailedPreStopHook, "PreStopHook failed")
		}
	}
	return int64(time.Since(start).Seconds())
}

// The annotations that let a container be stopped as its pod asked after
// the agent forgot the pod (an orphan after a restart of the agent): the
// kubelet's keys, holding the JSON of the container's preStop handler and
// ports (for an httpGet hook naming a port).
const (
	annotationPreStopHandler = "io.kubernetes.container.preStopHandler"
	annotationContainerPorts = "io.kubernetes.container.ports"
)

// recordOrphanSpec adds to a container's annotations what restoreOrphan
// needs: its preStop handler and ports.
func recordOrphanSpec(a map[string]string, c *v1.Container) {
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if raw, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[annotationPreStopHandler] = string(raw)
		}
	}
	if len(c.Ports) > 0 {
		if raw, err := json.Marshal(c.Ports); err == nil {
			a[annotationContainerPorts] = string(raw)
		}
	}
}

// restoreOrphan rebuilds, from the labels and annotations of container
// id, as much of its pod and spec as stopping it needs (the kubelet's
// restoreSpecsFromContainerLabels): the pod's name, namespace, UID and
// grace period, the container's name, ports and preStop handler. The
// restored pod lists no containers, so no event is recorded about it, as
// with the kubelet. Without the grace-period annotation the grace period
// is the minimum. When the container's status cannot be read, the pod is
// nil and the container is stopped with the minimum grace period.
func (m *Manager) restoreOrphan(ctx context.Context, id string) (*v1.Pod, *v1.Container) {
	resp, err := m.rs.ContainerStatus(ctx, id, false)
	if err != nil || resp.GetStatus() == nil {
		return nil, nil
	}
	st := resp.GetStatus()
	labels, ann := st.GetLabels(), st.GetAnnotations()
	grace := int64(0)
	if v, err := strconv.ParseInt(ann[annotationPodTerminationGracePeriod], 10, 64); err == nil {
		grace = v
	}
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = labels[runtime.LabelPodName], labels[runtime.LabelPodNamespace], types.UID(labels[runtime.LabelPodUID])
	pod.Spec.TerminationGracePeriodSeconds = &grace
	c := &v1.Container{Name: cmp.Or(labels[runtime.LabelContainerName], st.GetMetadata().GetName())}
	if raw := ann[annotationContainerPorts]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &c.Ports); err != nil {
			m.log.Error(err, "Unreadable container ports annotation", "containerID", id)
			c.Ports = nil
		}
	}
	if raw := ann[annotationPreStopHandler]; raw != "" {
		h := &v1.LifecycleHandler{}
		if err := json.Unmarshal([]byte(raw), h); err != nil {
			m.log.Error(err, "Unreadable preStop handler annotation: the container is stopped without it", "containerID", id)
		} else {
			c.Lifecycle = &v1.Lifecycle{PreStop: h}
		}
	}
	return pod, c
}
