package nodeapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}
// as the kubelet's getContainerLogs: the query is a v1.PodLogOptions (and
// the legacy "tail"), the errors and their codes are the kubelet's, and
// each write is flushed to the client at once.
func (h *Handler) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, podName, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	query := r.URL.Query()
	// The legacy "tail" parameter; "all" is no tail.
	if tail := query.Get("tail"); len(tail) > 0 {
		query["tailLines"] = []string{tail}
		if tail == "all" {
			delete(query, "tailLines")
		}
	}
	opts, err := decodePodLogOptions(query)
	if err != nil {
		writeError(w, http.StatusBadRequest, errors.New(`{"message": "Unable to decode query."}`))
		return
	}
	if !validPodLogOptions(opts) {
		writeError(w, http.StatusUnprocessableEntity, errors.New(`{"message": "Invalid request."}`))
		return
	}
	pod, ok := h.podByName(ns, podName)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("pod %q does not exist", podName))
		return
	}
	if !hasContainer(pod, container) {
		writeError(w, http.StatusNotFound, fmt.Errorf("container %q not found in pod %q", container, podName))
		return
	}
	fw, ok := newFlushWriter(w)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("unable to convert %T into http.Flusher, cannot show logs", w))
		return
	}
	var stdout, stderr io.Writer
	stream := v1.LogStreamAll
	if opts.Stream != nil {
		stream = *opts.Stream
	}
	switch stream {
	case v1.LogStreamStdout:
		stdout = fw
	case v1.LogStreamStderr:
		stderr = fw
	default:
		stdout, stderr = fw, fw
	}
	w.Header().Set("Transfer-Encoding", "chunked")
	if err := h.opts.Logs.ContainerLogs(r.Context(), pod, container, opts, stdout, stderr); err != nil {
		h.log.V(1).Info("Container log stream ended with an error", "pod", ns+"/"+podName, "container", container, "err", err.Error())
		if fw.wrote {
			// The status is sent: the error ends the body, as the
			// kubelet's late WriteError does.
			io.WriteString(w, err.Error())
			return
		}
		writeError(w, http.StatusBadRequest, err)
	}
}

// hasContainer reports whether the pod's spec has a container (init,
// regular or ephemeral) of that name.
func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// flushWriter flushes after every write, as the kubelet's flushwriter.
type flushWriter struct {
	w     io.Writer
	f     http.Flusher
	wrote bool
}

func newFlushWriter(w http.ResponseWriter) (*flushWriter, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, false
	}
	return &flushWriter{w: w, f: f}, true
}

func (fw *flushWriter) Write(p []byte) (int, error) {
	fw.wrote = true
	n, err := fw.w.Write(p)
	if err != nil {
		return n, err
	}
	fw.f.Flush()
	return n, nil
}

// decodePodLogOptions decodes the query as the API's parameter codec
// does for v1.PodLogOptions: a boolean is false only for "0" or "false",
// numbers are base-10 int64, sinceTime is RFC 3339.
func decodePodLogOptions(q url.Values) (*v1.PodLogOptions, error) {
	o := &v1.PodLogOptions{}
	boolean := func(name string) bool {
		v, ok := q[name]
		if !ok || len(v) == 0 {
			return false
		}
		return v[0] != "0" && !strings.EqualFold(v[0], "false")
	}
	integer := func(name string) (*int64, error) {
		v, ok := q[name]
		if !ok || len(v) == 0 || v[0] == "" {
			return nil, nil
		}
		i, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("nodeapi: %s: %w", name, err)
		}
		return &i, nil
	}
	o.Container = q.Get("container")
	o.Follow = boolean("follow")
	o.Previous = boolean("previous")
	o.Timestamps = boolean("timestamps")
	o.InsecureSkipTLSVerifyBackend = boolean("insecureSkipTLSVerifyBackend")
	var err error
	if o.SinceSeconds, err = integer("sinceSeconds"); err != nil {
		return nil, err
	}
	if o.TailLines, err = integer("tailLines"); err != nil {
		return nil, err
	}
	if o.LimitBytes, err = integer("limitBytes"); err != nil {
		return nil, err
	}
	if v := q.Get("sinceTime"); v != "" {
		var t metav1.Time
		if err := t.UnmarshalQueryParameter(v); err != nil {
			return nil, fmt.Errorf("nodeapi: sinceTime: %w", err)
		}
		o.SinceTime = &t
	}
	if v, ok := q["stream"]; ok && len(v) > 0 {
		s := v[0]
		o.Stream = &s
	}
	return o, nil
}

// validPodLogOptions applies the API's validation of PodLogOptions.
func validPodLogOptions(o *v1.PodLogOptions) bool {
	if o.TailLines != nil && *o.TailLines < 0 {
		return false
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		return false
	}
	if o.SinceSeconds != nil && *o.SinceSeconds < 1 {
		return false
	}
	if o.SinceSeconds != nil && o.SinceTime != nil {
		return false
	}
	if o.Stream != nil {
		switch *o.Stream {
		case v1.LogStreamStdout, v1.LogStreamStderr:
			// Tail counts lines of both streams: only with All.
			if o.TailLines != nil {
				return false
			}
		case v1.LogStreamAll:
		default:
			return false
		}
	}
	return true
}
