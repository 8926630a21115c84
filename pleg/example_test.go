package pleg_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func ExampleNewGeneric() {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()

	// The status getter is usually podruntime.Manager; this one reports only
	// the pod's identity.
	status := pleg.StatusGetterFunc(func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
		return &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: time.Now()}, nil
	})
	cache := pleg.NewCache()
	g, err := pleg.NewGeneric(rt, status, cache, pleg.GenericOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}

	_, _ = rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "1234"},
		Labels:   map[string]string{runtime.LabelPodUID: "1234"},
	}, "")

	// Run(ctx) relists every second; one relist by hand here.
	_ = g.Relist(ctx)
	ev := <-g.Events()
	fmt.Println(ev.ID, ev.Type)
	st, _ := cache.Get("1234")
	fmt.Println(st.Namespace + "/" + st.Name)
	// Output:
	// 1234 ContainerStarted
	// default/web
}

func ExampleNewCache() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cache := pleg.NewCache()
	lastSync := time.Now()

	go func() {
		// A relist that read the pod after lastSync.
		cache.Set("1234", &runtime.PodStatus{ID: "1234", Name: "web"}, nil, lastSync.Add(time.Millisecond))
	}()
	// A pod worker waits for a status newer than its last sync.
	st, err := cache.GetNewerThan(ctx, "1234", lastSync)
	fmt.Println(st.Name, err)
	// Output: web <nil>
}
