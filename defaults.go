package nodekit

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/internal/runtimeclass"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/runtime/credentials"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/configmap"
	"github.com/nodekit/nodekit/volume/downwardapi"
	"github.com/nodekit/nodekit/volume/emptydir"
	"github.com/nodekit/nodekit/volume/hostpath"
	"github.com/nodekit/nodekit/volume/projected"
	"github.com/nodekit/nodekit/volume/secret"
)

// The defaults wire chooses among parts, each a choice made from Options.

// podObjects chooses the agent's ConfigMaps and Secrets: Options.Objects,
// else the API server's (with KubeClient), read through a cache as the
// kubelet's managers do, which is also returned (it learns of pods); else
// none.
func podObjects(o Options) (objects.Getter, *objects.Cache, error) {
	switch {
	case o.Objects != nil:
		return o.Objects, nil, nil
	case o.KubeClient != nil:
		// An object is served for as long as the volumes go without a
		// refresh (1m by default, the kubelet's TTL), so an update reaches
		// a volume within two refresh periods.
		ttl := o.Volumes.RefreshPeriod
		if ttl < 0 {
			ttl = 0 // refreshes disabled: the default TTL
		}
		c, err := objects.NewCache(apiObjects{o.KubeClient}, objects.CacheOptions{TTL: ttl})
		if err != nil {
			return nil, nil, fmt.Errorf("nodekit: %w", err)
		}
		return c, c, nil
	}
	return nil, nil, nil
}

// apiObjects gets ConfigMaps and Secrets from the API server.
type apiObjects struct{ client kubeclient.Interface }

func (g apiObjects) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return g.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g apiObjects) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return g.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// volumePlugins are the default volume plugins: hostPath, emptyDir and
// downwardAPI, and over the agent's objects configMap and secret, and
// projected (which also requests service-account tokens) with KubeClient.
func volumePlugins(o Options, vo volume.Options, objs objects.Getter, allocatable func() v1.ResourceList, log logr.Logger) ([]volume.Plugin, error) {
	hp, err := hostpath.New(hostpath.Options{AllowedHostPaths: vo.AllowedHostPaths, NoBind: vo.NoSubPathBind, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	plugins := []volume.Plugin{hp, emptydir.New(emptydir.Options{Logger: log}),
		downwardapi.New(downwardapi.Options{NodeAllocatable: allocatable, Logger: log})}
	if objs == nil {
		return plugins, nil
	}
	cm, err := configmap.New(objs, configmap.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	sec, err := secret.New(objs, secret.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	plugins = append(plugins, cm, sec)
	if client := o.KubeClient; client != nil {
		proj, err := projected.New(projected.Funcs{
			ConfigMapFunc: objs.GetConfigMap,
			SecretFunc:    objs.GetSecret,
			TokenFunc: func(ctx context.Context, namespace, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
				return client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
			},
		}, projected.Options{NodeAllocatable: allocatable, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		plugins = append(plugins, proj)
	}
	return plugins, nil
}

// nodeCredentials are the node's logins for image pulls after base (the
// runtime manager's own): the node docker config files and, when
// configured, the credential-provider plugins (their service-account
// tokens requested through KubeClient).
func nodeCredentials(o Options, base credentials.Provider, log logr.Logger) (credentials.Provider, error) {
	node := credentials.Providers{base, credentials.NodeFiles{RootDir: o.RootDir, Log: log.WithName("credentials")}}
	cfg, bin := o.ImageCredentialProviderConfig, o.ImageCredentialProviderBinDir
	switch {
	case cfg == "" && bin == "":
		return node, nil
	case cfg == "" || bin == "":
		return nil, errors.New("nodekit: ImageCredentialProviderConfig and ImageCredentialProviderBinDir go together")
	}
	popts := credentials.PluginOptions{ConfigPath: cfg, BinDir: bin, Log: log.WithName("credential-provider")}
	if client := o.KubeClient; client != nil {
		popts.ServiceAccount = func(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
			return client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
		}
		popts.Token = func(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
		}
	}
	plugins, err := credentials.NewPlugins(popts)
	if err != nil {
		return nil, fmt.Errorf("nodekit: image credential providers: %w", err)
	}
	return append(node, plugins), nil
}

// admissionChecks are the agent's admission checks, in the kubelet's
// order (resources the API server would have refused, sysctls, OS, the
// supplemental groups policy, pod count, resources, node affinity, node
// name, host ports, NoExecute taints, AppArmor), the RuntimeClass check
// (the class exists, and its handler is among the runtime's handlers),
// then Options.Admit; the first rejection wins and records a Warning event
// on the pod with its reason and message, as the kubelet's rejectPod.
func admissionChecks(o Options, classes *runtimeclass.Resolver, handlers func() []string, node func() *v1.Node, runtimeSGP func() bool, recorder *events.Recorder) ([]admission.Handler, error) {
	sysctls, err := admission.Sysctls(admission.SysctlOptions{AllowedUnsafe: o.AllowedUnsafeSysctls})
	if err != nil {
		return nil, err
	}
	hs := []admission.Handler{
		admission.InvalidResources(),
		sysctls,
		admission.OS(),
		admission.SupplementalGroupsPolicy(withRuntimeFeatures(node, runtimeSGP)),
		admission.PodCount(o.Node.MaxPods),
		admission.ResourceFit(node),
		admission.NodeAffinity(node),
		admission.NodeName(node),
		admission.NodePorts(),
		admission.Taints(node),
		admission.AppArmor(admission.AppArmorOptions{}),
		classes.Admission(handlers),
	}
	chain := admission.Chain(append(hs, o.Admit...)...)
	return []admission.Handler{admission.Func(func(pod *v1.Pod, active []*v1.Pod) admission.Result {
		r := chain.Admit(pod, active)
		if !r.Admit {
			recorder.Event(pod, v1.EventTypeWarning, r.Reason, r.Message)
		}
		return r
	})}, nil
}

// withRuntimeFeatures is node with, when its status has no features, the
// runtime's support of the Strict supplemental groups policy, as the
// kubelet's Node reports it (status.features) from the runtime's Status.
func withRuntimeFeatures(node func() *v1.Node, sgp func() bool) func() *v1.Node {
	return func() *v1.Node {
		n := node()
		if n == nil || n.Status.Features != nil {
			return n
		}
		cp := *n
		supported := sgp()
		cp.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: &supported}
		return &cp
	}
}

// localNode is the Node admission checks pods against when none is
// registered (a standalone agent, or one not registered yet, as the
// kubelet's initial node): made from the agent's own name, labels
// (kubernetes.io/hostname, os and arch, plus Options.Node.Labels), taints
// (Options.Node.Taints), capacity and allocatable resources, as a
// registered Node reports them.
func localNode(o Options, capacity, allocatable v1.ResourceList) *v1.Node {
	labels := map[string]string{
		node.LabelHostname: o.NodeName,
		node.LabelOS:       goruntime.GOOS,
		node.LabelArch:     goruntime.GOARCH,
	}
	for k, v := range o.Node.Labels {
		labels[k] = v
	}
	pods := *resource.NewQuantity(int64(o.Node.MaxPods), resource.DecimalSI)
	c := v1.ResourceList{v1.ResourcePods: pods}
	for k, v := range capacity {
		c[k] = v
	}
	a := v1.ResourceList{v1.ResourcePods: pods}
	for k, v := range allocatable {
		a[k] = v
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: o.NodeName, Labels: labels},
		Spec:       v1.NodeSpec{Taints: o.Node.Taints},
		Status:     v1.NodeStatus{Capacity: c, Allocatable: a},
	}
}
