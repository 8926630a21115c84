package nodeapi

import (
	"bytes"
	"fmt"
	"net/http"
)

// healthz answers as the apiserver library's healthz handler the kubelet
// installs: "ok", or 500 listing the failed checks, with ?verbose the list
// of all.
func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	var out bytes.Buffer
	failed := false
	for _, c := range h.checks() {
		if err := c.Check(r); err != nil {
			failed = true
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
			h.log.V(1).Info("Health check failed", "check", c.Name, "err", err.Error())
		} else {
			fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		out.WriteString("healthz check failed\n")
		w.Write(out.Bytes())
		return
	}
	if _, verbose := r.URL.Query()["verbose"]; verbose {
		out.WriteString("healthz check passed\n")
		w.Write(out.Bytes())
		return
	}
	w.Write([]byte("ok"))
}

func (h *Handler) healthzCheck(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("check")
	for _, c := range h.checks() {
		if c.Name != name {
			continue
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := c.Check(r); err != nil {
			http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
		return
	}
	http.NotFound(w, r)
}

func (h *Handler) checks() []HealthCheck {
	ok := func(*http.Request) error { return nil }
	return append([]HealthCheck{{Name: "ping", Check: ok}, {Name: "log", Check: ok}}, h.opts.Health...)
}
