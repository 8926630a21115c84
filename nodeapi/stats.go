package nodeapi

import (
	"fmt"
	"net/http"
)

// summary serves /stats/summary as the kubelet's handleSummary:
// ?only_cpu_and_memory=true asks for CPU and memory alone; an error is a
// 500 "Internal Error: ...".
func (h *Handler) summary(w http.ResponseWriter, r *http.Request) {
	only := false
	if err := r.ParseForm(); err == nil {
		if v, ok := r.Form["only_cpu_and_memory"]; ok && len(v) == 1 && v[0] == "true" {
			only = true
		}
	}
	s, err := h.opts.Stats.Summary(r.Context(), only)
	if err != nil {
		h.log.Error(err, "Cannot get the stats summary")
		writeText(w, http.StatusInternalServerError, fmt.Sprintf("Internal Error: %v", err))
		return
	}
	h.encode(w, r.URL.Path, s)
}
