package nodekit

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/env"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/configmap"
	"github.com/nodekit/nodekit/volume/projected"
	"github.com/nodekit/nodekit/volume/secret"
)

// podSpecParts are the parts that serve what a pod's spec refers to
// beyond its own fields: the ConfigMaps and Secrets of its environment
// and volumes.
type podSpecParts struct {
	// objects is Options.Objects, or the API server's through an
	// objects.Cache, or nil.
	objects objects.Getter
	// cache is objects when the agent made it: it learns of pods.
	cache *objects.Cache
}

// apiObjects gets ConfigMaps and Secrets from the API server.
type apiObjects struct{ client kubeclient.Interface }

func (g apiObjects) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return g.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g apiObjects) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return g.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// setUpObjects chooses the agent's ConfigMaps and Secrets: Options.Objects,
// else the API server's (with KubeClient), read through a cache as the
// kubelet's managers do.
func (a *Agent) setUpObjects() error {
	switch {
	case a.opts.Objects != nil:
		a.spec.objects = a.opts.Objects
	case a.opts.KubeClient != nil:
		// An object is served for as long as the volumes go without a
		// refresh (1m by default, the kubelet's TTL), so an update reaches
		// a volume within two refresh periods.
		ttl := a.opts.Volumes.RefreshPeriod
		if ttl < 0 {
			ttl = 0 // refreshes disabled: the default TTL
		}
		c, err := objects.NewCache(apiObjects{client: a.opts.KubeClient}, objects.CacheOptions{TTL: ttl})
		if err != nil {
			return fmt.Errorf("nodekit: %w", err)
		}
		a.spec.objects, a.spec.cache = c, c
	}
	return nil
}

// allocatableResources is what the downward API reports of the node: the
// Node's allocatable resources when joined, else Agent.Allocatable.
func (a *Agent) allocatableResources() v1.ResourceList {
	if a.node != nil {
		if n, ok := a.node.Node(); ok && n.Status.Allocatable != nil {
			return n.Status.Allocatable
		}
	}
	return a.Allocatable()
}

// wireRuntime gives the runtime manager the agent's root directory (for
// termination-message files) and the environment resolver, unless
// Options.RuntimeManager has its own.
func (a *Agent) wireRuntime(o *podruntime.Options) {
	if o.RootDir == "" {
		o.RootDir = a.opts.RootDir
	}
	if o.Env != nil {
		return
	}
	o.Env = env.New(env.Options{
		Objects:         a.spec.objects,
		NodeAllocatable: a.allocatableResources,
		HostIPs:         a.hostIPs,
		Recorder:        &a.recorder,
		Services:        a.serviceLinkServices(),
	})
}

// objectVolumePlugins are the configMap, secret and projected plugins over
// the agent's objects: configMap and secret with any getter, projected
// (which also requests service-account tokens) with KubeClient.
func (a *Agent) objectVolumePlugins(log logr.Logger) ([]volume.Plugin, error) {
	if a.spec.objects == nil {
		return nil, nil
	}
	cm, err := configmap.New(a.spec.objects, configmap.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	sec, err := secret.New(a.spec.objects, secret.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	plugins := []volume.Plugin{cm, sec}
	if client := a.opts.KubeClient; client != nil {
		proj, err := projected.New(projected.Funcs{
			ConfigMapFunc: a.spec.objects.GetConfigMap,
			SecretFunc:    a.spec.objects.GetSecret,
			TokenFunc: func(ctx context.Context, namespace, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
				return client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
			},
		}, projected.Options{NodeAllocatable: a.allocatableResources, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		plugins = append(plugins, proj)
	}
	return plugins, nil
}

// registerPods tells the agent's object cache of the pods it syncs, so a
// new pod reads its ConfigMaps and Secrets anew.
func (a *Agent) registerPods(sync podworker.SyncFuncs) podworker.SyncFuncs {
	if a.spec.cache == nil {
		return sync
	}
	return registeringSyncFuncs{SyncFuncs: sync, cache: a.spec.cache}
}

type registeringSyncFuncs struct {
	podworker.SyncFuncs
	cache *objects.Cache
}

func (s registeringSyncFuncs) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod *v1.Pod, podStatus *runtime.PodStatus) (bool, error) {
	s.cache.RegisterPod(pod)
	return s.SyncFuncs.SyncPod(ctx, updateType, pod, podStatus)
}

func (s registeringSyncFuncs) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error {
	err := s.SyncFuncs.SyncTerminatedPod(ctx, pod, podStatus)
	if err == nil {
		s.cache.UnregisterPod(pod.UID)
	}
	return err
}

// The kubelet's reason and message of a pod past its activeDeadlineSeconds.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// activeDeadline is the kubelet's active-deadline handler as a status
// edit: a pod whose activeDeadlineSeconds have passed since it started
// (its start time as the status manager holds it) fails with reason
// DeadlineExceeded, with a Normal event of that reason, and SyncPod then
// reports it terminal so its worker kills its containers. A pod not yet
// there is queued to sync when its deadline passes. nil for a pod without
// a deadline.
func (s *PodSyncer) activeDeadline(pod *v1.Pod) func(*v1.PodStatus) {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return nil
	}
	return func(st *v1.PodStatus) {
		start := pod.Status.StartTime
		if prev, ok := s.c.Statuses.GetPodStatus(pod.UID); ok && prev.StartTime != nil {
			start = prev.StartTime
		}
		if start == nil {
			start = st.StartTime
		}
		if start == nil || start.IsZero() {
			return
		}
		left := time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second - time.Since(start.Time)
		if left > 0 {
			s.c.Queue.Enqueue(pod.UID, left)
			return
		}
		st.Phase, st.Reason, st.Message = v1.PodFailed, reasonDeadlineExceeded, messageDeadlineExceeded
		s.c.Events.Event(runtime.PodReference(pod, ""), v1.EventTypeNormal, reasonDeadlineExceeded, messageDeadlineExceeded)
	}
}
