package volume_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/volume"
)

// refreshing is a Refresher over configMap volumes that records the pods
// SetUp saw and can be made to fail.
type refreshing struct {
	volume.Funcs
	mu    sync.Mutex
	seen  []string // the label "v" of each SetUp's pod
	fail  error
	mount string
}

func (r *refreshing) RequiresRefresh(vol *v1.Volume) bool { return vol.ConfigMap != nil }

func (r *refreshing) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func newRefreshing(t *testing.T) *refreshing {
	r := &refreshing{mount: t.TempDir()}
	r.Funcs = volume.Funcs{
		PluginName:     "test/refreshing",
		CanSupportFunc: func(vol *v1.Volume) bool { return vol.ConfigMap != nil },
		SetUpFunc: func(_ context.Context, req volume.SetUpRequest) (volume.Mount, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen = append(r.seen, req.Pod.Labels["v"])
			if r.fail != nil {
				return volume.Mount{}, r.fail
			}
			return volume.Mount{HostPath: r.mount}, nil
		},
	}
	return r
}

// TestRefresh: a Refresher's volumes are set up again every RefreshPeriod
// and at once when the pod changes; a failed refresh keeps the volume.
func TestRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRefreshing(t)
		m, err := volume.NewManager(t.TempDir(), volume.Options{Plugins: []volume.Plugin{r}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()

		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1", Labels: map[string]string{"v": "1"}},
			Spec: v1.PodSpec{
				Volumes:    []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}},
				Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}}},
			},
		}
		if _, err := m.WaitForPodVolumes(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		first := len(r.calls())
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := len(r.calls()) - first; got != 1 {
			t.Errorf("%d refreshes in a minute, want 1", got)
		}

		pod2 := pod.DeepCopy()
		pod2.Labels["v"] = "2"
		m.AddPod(pod2)
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if calls := r.calls(); calls[len(calls)-1] != "2" {
			t.Errorf("set-ups saw %v; the new pod was not refreshed at once", calls)
		}

		r.mu.Lock()
		r.fail = errors.New("api server down")
		r.mu.Unlock()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		mounts, err := m.WaitForPodVolumes(t.Context(), pod2)
		if err != nil || mounts["cfg"].HostPath != r.mount {
			t.Errorf("after failed refreshes: mounts %v, err %v; want the volume kept", mounts, err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
