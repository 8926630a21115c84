package nodekit_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/syncloop"
)

// dropAdds is a WrapHandler wrapper that drops the additions of the pods
// it names and passes everything else on.
type dropAdds struct {
	syncloop.SyncHandler
	drop map[string]bool
}

func (d dropAdds) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	var keep []*v1.Pod
	for _, p := range pods {
		if !d.drop[p.Name] {
			keep = append(keep, p)
		}
	}
	d.SyncHandler.HandlePodAdditions(ctx, keep)
}

// TestAgentUpdateOfDroppedPodIsAdmitted: a pod whose ADD a WrapHandler
// wrapper dropped is, at its next UPDATE, an addition to the default
// handler: it goes through admission (a pod the node cannot take is
// rejected, not started) rather than being started as a known pod.
func TestAgentUpdateOfDroppedPodIsAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{})
		defer rt.Close()
		src := make(chanSource, 1)
		h := startAgent(t, rt, nodekit.Options{
			Sources: []nodekit.NamedSource{{Name: "test", Source: src}},
			WrapHandler: func(sh syncloop.SyncHandler) syncloop.SyncHandler {
				return dropAdds{SyncHandler: sh, drop: map[string]bool{"windows": true, "fits": true}}
			},
		})
		windows := testPod("windows", v1.RestartPolicyAlways, nil, "sleep 3600")
		windows.Spec.OS = &v1.PodOS{Name: v1.Windows}
		fits := testPod("fits", v1.RestartPolicyAlways, nil, "sleep 3600")
		src <- []*v1.Pod{windows, fits}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(rt.Sandboxes()); n != 0 {
			t.Fatalf("%d sandboxes after the wrapper dropped both additions, want 0", n)
		}

		// A label changes: the source sends UPDATEs.
		updated := func(p *v1.Pod) *v1.Pod {
			p = p.DeepCopy()
			p.Labels = map[string]string{"changed": "yes"}
			return p
		}
		src <- []*v1.Pod{updated(windows), updated(fits)}
		time.Sleep(5 * time.Second)
		synctest.Wait()

		started := map[string]bool{}
		for _, sb := range rt.Sandboxes() {
			started[sb.Name] = true
		}
		if started["windows"] {
			t.Error("a pod that fails admission was started by its update")
		}
		if s, ok := h.status("default/windows"); !ok || s.Phase != v1.PodFailed || s.Reason != "PodOSNotSupported" {
			t.Errorf("the inadmissible pod's status = %s %q, want Failed PodOSNotSupported", s.Phase, s.Reason)
		}
		if !started["fits"] || !h.running("default/fits") {
			t.Error("an admissible pod was not started by its update")
		}
	})
}
