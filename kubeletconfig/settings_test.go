package kubeletconfig_test

import (
	"context"
	"encoding/json"
	"flag"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/kubeletconfig"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

// fullConfig is a KubeletConfiguration with every field nodekit acts on
// set away from its default, and some it does not act on.
func fullConfig() *kubeletv1beta1.KubeletConfiguration {
	d := func(s string) metav1.Duration {
		v, _ := time.ParseDuration(s)
		return metav1.Duration{Duration: v}
	}
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta:           metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: "kubelet.config.k8s.io/v1beta1"},
		StaticPodPath:      "/etc/kubernetes/manifests",
		CgroupRoot:         "/nodekit",
		PodLogsDir:         "/var/log/mypods",
		SyncFrequency:      d("30s"),
		FileCheckFrequency: d("5s"),
		Address:            "10.0.0.5",
		Port:               10260,
		ServerTLSBootstrap: true,
		RotateCertificates: true,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: "/etc/kubernetes/pki/ca.crt"},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: d("0s")},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:                    kubeletv1beta1.KubeletAuthorization{Mode: "Webhook"},
		ClusterDomain:                    "cluster.local",
		ClusterDNS:                       []string{"10.96.0.10"},
		NodeStatusUpdateFrequency:        d("20s"),
		NodeLeaseDurationSeconds:         60,
		ImageMinimumGCAge:                d("5m"),
		ImageMaximumGCAge:                d("168h"),
		ImageGCHighThresholdPercent:      ptr.To[int32](90),
		ImageGCLowThresholdPercent:       ptr.To[int32](70),
		MaxPods:                          55,
		PodPidsLimit:                     ptr.To[int64](4096),
		ResolverConfig:                   ptr.To("/run/systemd/resolve/resolv.conf"),
		CPUCFSQuota:                      ptr.To(false),
		CPUCFSQuotaPeriod:                &metav1.Duration{Duration: 50 * time.Millisecond},
		SerializeImagePulls:              ptr.To(false),
		MaxParallelImagePulls:            ptr.To[int32](3),
		EvictionHard:                     map[string]string{"memory.available": "200Mi"},
		EvictionSoft:                     map[string]string{"nodefs.available": "15%"},
		EvictionSoftGracePeriod:          map[string]string{"nodefs.available": "1m30s"},
		EvictionMinimumReclaim:           map[string]string{"memory.available": "50Mi"},
		EvictionPressureTransitionPeriod: d("1m"),
		EvictionMaxPodGracePeriod:        20,
		ContainerLogMaxSize:              "5Mi",
		ContainerLogMaxFiles:             ptr.To[int32](3),
		ContainerLogMonitorInterval:      &metav1.Duration{Duration: 20 * time.Second},
		SystemReserved:                   map[string]string{"cpu": "500m", "memory": "512Mi"},
		KubeReserved:                     map[string]string{"memory": "256Mi"},
		EnforceNodeAllocatable:           []string{"pods"},
		AllowedUnsafeSysctls:             []string{"net.core.somaxconn"},
		RegisterWithTaints:               []v1.Taint{{Key: "dedicated", Value: "edge", Effect: v1.TaintEffectNoSchedule}},
		LocalStorageCapacityIsolation:    ptr.To(false),
		ContainerRuntimeEndpoint:         "unix:///run/containerd/containerd.sock",
		CrashLoopBackOff:                 kubeletv1beta1.CrashLoopBackOffConfig{MaxContainerRestartPeriod: &metav1.Duration{Duration: time.Minute}},
		UserNamespaces:                   &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](131072)},
		// Not acted on: at their defaults (not reported) or not (reported).
		CgroupDriver:          "systemd",
		HealthzPort:           ptr.To[int32](10248),
		HealthzBindAddress:    "127.0.0.1",
		CPUManagerPolicy:      "static",
		TopologyManagerPolicy: "none",
		FeatureGates:          map[string]bool{"InPlacePodVerticalScaling": true, "NodeSwap": false},
		ReadOnlyPort:          10255,
		ShutdownGracePeriod:   d("30s"),
		MemorySwap:            kubeletv1beta1.MemorySwapConfiguration{SwapBehavior: "LimitedSwap"},
	}
}

func yamlOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSettingsFullConfiguration(t *testing.T) {
	f, err := kubeletconfig.Parse(yamlOf(t, fullConfig()))
	if err != nil {
		t.Fatal(err)
	}
	fl := &kubeletconfig.Flags{RootDir: "/var/lib/nodekit", HostnameOverride: "Edge-1", NodeIP: "10.0.0.5",
		NodeLabels: map[string]string{"zone": "a"}}
	s, err := kubeletconfig.New(f, fl)
	if err != nil {
		t.Fatal(err)
	}
	var want nodekit.Options
	want.NodeName = "edge-1"
	want.RootDir = "/var/lib/nodekit"
	want.ResyncInterval = 30 * time.Second
	want.AllowedUnsafeSysctls = []string{"net.core.somaxconn"}
	want.UserNamespaces.IDsPerPod = 131072
	n := &want.Node
	n.InternalIP = net.ParseIP("10.0.0.5")
	n.Labels = map[string]string{"zone": "a"}
	n.MaxPods = 55
	n.Taints = []v1.Taint{{Key: "dedicated", Value: "edge", Effect: v1.TaintEffectNoSchedule}}
	n.StatusUpdateFrequency, n.StatusReportFrequency = 20*time.Second, 20*time.Second // report follows update, as the kubelet's
	n.LeaseDuration = time.Minute
	rm := &want.RuntimeManager
	rm.PodLogsDir = "/var/log/mypods"
	rm.MaxParallelImagePulls = 3
	rm.BackOff.Max = time.Minute
	rm.DNS.ClusterDNS, rm.DNS.ClusterDomain, rm.DNS.ResolvConf = []string{"10.96.0.10"}, "cluster.local", "/run/systemd/resolve/resolv.conf"
	want.Cgroups.Root = "nodekit/kubepods"
	want.Cgroups.DisableCPUQuota = true
	want.Cgroups.CPUCFSQuotaPeriod = 50 * time.Millisecond
	want.Cgroups.PodPidsLimit = 4096
	nr := &want.NodeResources
	nr.SystemReserved = v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("512Mi")}
	nr.KubeReserved = v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")}
	th, err := eviction.ParseThresholds(eviction.Config{
		Hard: map[string]string{"memory.available": "200Mi"}, Soft: map[string]string{"nodefs.available": "15%"},
		SoftGracePeriod: map[string]string{"nodefs.available": "90s"}, MinimumReclaim: map[string]string{"memory.available": "50Mi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := &nr.Eviction.Manager
	ev.Thresholds, ev.PressureTransitionPeriod, ev.MaxPodGracePeriodSeconds, ev.DisableLocalStorageEviction = th, time.Minute, 20, true
	nr.GC.Images.Policy.HighThresholdPercent, nr.GC.Images.Policy.LowThresholdPercent = 90, 70
	nr.GC.Images.Policy.MinAge, nr.GC.Images.Policy.MaxAge = 5*time.Minute, 168*time.Hour
	nr.LogRotation.MaxSize, nr.LogRotation.MaxFiles, nr.LogRotation.Period = resource.MustParse("5Mi"), 3, 20*time.Second
	opts := []cmp.Option{cmpopts.IgnoreTypes(logr.Logger{}), cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(node.Options{}),
		cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
		cmp.Comparer(func(a, b net.IP) bool { return a.Equal(b) }),
		cmpopts.IgnoreFields(nodekit.Options{}, "Logger")}
	if d := cmp.Diff(want, s.Options, opts...); d != "" {
		t.Errorf("Options (-want +got):\n%s", d)
	}
	wantServer := nodeserver.Options{Address: "10.0.0.5", Port: 10260, ServerTLSBootstrap: true,
		CertDir: "/var/lib/nodekit/pki", ClientCAFile: "/etc/kubernetes/pki/ca.crt", NoClusterClientCA: true}
	if d := cmp.Diff(wantServer, s.Server, cmpopts.IgnoreUnexported()); d != "" {
		t.Errorf("Server (-want +got):\n%s", d)
	}
	wantUnsupported := []string{"cgroupDriver", "cpuManagerPolicy", "featureGates[InPlacePodVerticalScaling]",
		"memorySwap.swapBehavior", "readOnlyPort", "shutdownGracePeriod"}
	if d := cmp.Diff(wantUnsupported, s.Unsupported); d != "" {
		t.Errorf("Unsupported (-want +got):\n%s", d)
	}
	if c := s.Config; c.StaticPodPath != "/etc/kubernetes/manifests" || !c.RotateCertificates || c.ContainerRuntimeEndpoint != "unix:///run/containerd/containerd.sock" {
		t.Errorf("Config: staticPodPath %q, rotateCertificates %t, containerRuntimeEndpoint %q", c.StaticPodPath, c.RotateCertificates, c.ContainerRuntimeEndpoint)
	}
}

// TestSettingsDefaults: an empty configuration gives the kubelet's
// defaults.
func TestSettingsDefaults(t *testing.T) {
	s, err := kubeletconfig.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := s.Options
	if o.ResyncInterval != time.Minute || o.Node.MaxPods != 110 || o.Node.StatusUpdateFrequency != 10*time.Second ||
		o.Node.StatusReportFrequency != 5*time.Minute || o.Node.LeaseDuration != 40*time.Second ||
		o.RuntimeManager.MaxParallelImagePulls != 1 || o.RuntimeManager.PodLogsDir != "/var/log/pods" ||
		o.Cgroups.CPUCFSQuotaPeriod != 100*time.Millisecond || o.Cgroups.DisableCPUQuota || o.Cgroups.PodPidsLimit != 0 ||
		o.NodeResources.LogRotation.MaxFiles != 5 || o.NodeResources.GC.Images.Policy.HighThresholdPercent != 85 ||
		o.NodeResources.SkipAllocatableEnforcement || o.RuntimeManager.BackOff.Max != 300*time.Second {
		t.Errorf("defaults: %+v", o)
	}
	var sigs []string
	for _, th := range o.NodeResources.Eviction.Manager.Thresholds {
		sigs = append(sigs, th.String())
	}
	if want := []string{"imagefs.available<15%", "imagefs.inodesFree<5%", "memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%"}; !slices.Equal(sigs, want) {
		t.Errorf("eviction thresholds %q, want %q", sigs, want)
	}
	if s.Server.Port != 10250 || s.Server.Address != "" || len(s.Unsupported) != 0 {
		t.Errorf("server %+v, unsupported %q", s.Server, s.Unsupported)
	}
}

// TestFlagsOverFile: flags given win over the file's fields; those not
// given leave them.
func TestFlagsOverFile(t *testing.T) {
	f, err := kubeletconfig.Parse([]byte(`kind: KubeletConfiguration
apiVersion: kubelet.config.k8s.io/v1beta1
maxPods: 20
clusterDomain: file.local
registerWithTaints: [{key: a, effect: NoSchedule}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var fl kubeletconfig.Flags
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fl.Register(fs, "/var/lib/nodekit")
	if err := fs.Parse([]string{"--max-pods=30", "--register-with-taints=b=c:NoExecute", "--node-labels=x=y,z=w", "--cert-dir=/pki"}); err != nil {
		t.Fatal(err)
	}
	s, err := kubeletconfig.New(f, &fl)
	if err != nil {
		t.Fatal(err)
	}
	if s.Options.Node.MaxPods != 30 || s.Options.RuntimeManager.DNS.ClusterDomain != "file.local" || s.CertDir != "/pki" {
		t.Errorf("maxPods %d, clusterDomain %q, certDir %q", s.Options.Node.MaxPods, s.Options.RuntimeManager.DNS.ClusterDomain, s.CertDir)
	}
	if d := cmp.Diff([]v1.Taint{{Key: "b", Value: "c", Effect: v1.TaintEffectNoExecute}}, s.Options.Node.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"x": "y", "z": "w"}, s.Options.Node.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	for _, bad := range [][]string{{"--node-labels=a b=c"}, {"--register-with-taints=a=b"}, {"--max-pods=x"}, {"--cluster-dns=nope"}} {
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		new(kubeletconfig.Flags).Register(fs, "/r")
		if err := fs.Parse(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestInvalidValues: a value nodekit cannot use fails with its field's
// path.
func TestInvalidValues(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"evictionHard: {memory.available: lots}", "evictionHard[memory.available]: "},
		{"evictionHard: {disk.free: 1Gi}", "evictionHard[disk.free]: "},
		{"evictionSoft: {memory.available: 1Gi}", "evictionSoft[memory.available]: "},
		{"evictionSoftGracePeriod: {memory.available: 1m}", "evictionSoftGracePeriod[memory.available]: "},
		{"systemReserved: {cpu: many}", "systemReserved[cpu]: "},
		{"kubeReserved: {memory: -1Gi}", "kubeReserved[memory]: "},
		{"maxPods: -1", "maxPods: "},
		{"maxPods: ten", "maxPods: "},
		{"port: 70000", "port: "},
		{"address: here", "address: "},
		{"clusterDNS: [10.0.0.10, dns]", "clusterDNS[1]: "},
		{"imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60", "imageGCLowThresholdPercent: "},
		{"containerLogMaxFiles: 1", "containerLogMaxFiles: "},
		{"containerLogMaxSize: big", "containerLogMaxSize: "},
		{"cpuCFSQuotaPeriod: 2s", "cpuCFSQuotaPeriod: "},
		{"registerWithTaints: [{key: a, effect: Sometimes}]", "registerWithTaints[0]: "},
		{"userNamespaces: {idsPerPod: 1000}", "userNamespaces.idsPerPod: "},
		{"syncFrequency: -1s", "syncFrequency: "},
		{"podLogsDir: logs", "podLogsDir: "},
		{"enforceNodeAllocatable: [everything]", "enforceNodeAllocatable[0]: "},
		{"crashLoopBackOff: {maxContainerRestartPeriod: 1h}", "crashLoopBackOff.maxContainerRestartPeriod: "},
		{"tlsCertFile: /a.crt", "tlsCertFile, tlsPrivateKeyFile: "},
	} {
		f, err := kubeletconfig.Parse([]byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n" + tc.yaml))
		if err == nil {
			_, err = kubeletconfig.New(f, nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.yaml, err, tc.want)
		}
	}
	for _, bad := range []string{"kind: Pod\napiVersion: v1", "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1", "", "[1, 2]"} {
		if _, err := kubeletconfig.Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestUnknownField: a field KubeletConfiguration does not have is
// reported, the agent goes on (the kubelet's lenient decoding).
func TestUnknownField(t *testing.T) {
	f, err := kubeletconfig.Parse([]byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPod: 3\nlogging: {verbosity: 2, format: text, flushFrequency: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := kubeletconfig.New(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"maxPod (unknown field)"}, s.Unsupported); d != "" {
		t.Errorf("Unsupported (-want +got):\n%s", d)
	}
	if s.Config.Logging.Verbosity != 2 {
		t.Errorf("logging.verbosity %d", s.Config.Logging.Verbosity)
	}
}

// TestFieldNames: the fields the package knows are v1beta1's.
func TestFieldNames(t *testing.T) {
	var want []string
	typ := reflect.TypeFor[kubeletv1beta1.KubeletConfiguration]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	got := kubeletconfig.FieldNames()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("field names (-v1beta1 +kubeletconfig):\n%s", d)
	}
	// Every field of Configuration has v1beta1's name and JSON type.
	ours := reflect.TypeFor[kubeletconfig.Configuration]()
	for i := range ours.NumField() {
		name, _, _ := strings.Cut(ours.Field(i).Tag.Get("json"), ",")
		if !slices.Contains(want, name) {
			t.Errorf("Configuration.%s: %q is not a v1beta1 field", ours.Field(i).Name, name)
		}
	}
	// A full v1beta1 configuration reads back the same through ours.
	full := fullConfig()
	f, err := kubeletconfig.Parse(yamlOf(t, full))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	var back kubeletv1beta1.KubeletConfiguration
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.MaxPods != full.MaxPods || back.EvictionSoftGracePeriod["nodefs.available"] != "1m30s" ||
		*back.UserNamespaces.IDsPerPod != 131072 || back.Authentication.X509.ClientCAFile != full.Authentication.X509.ClientCAFile {
		t.Errorf("round trip lost fields: %+v", back)
	}
}

// TestConfigz: the effective configuration in the kubelet's form, the
// file's fields kept, the defaults filled in.
func TestConfigz(t *testing.T) {
	f, err := kubeletconfig.Parse([]byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 20\ncgroupDriver: systemd\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := kubeletconfig.New(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Configz()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		KubeletConfig kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	c := got.KubeletConfig
	if c.MaxPods != 20 || c.CgroupDriver != "systemd" || c.SyncFrequency.Duration != time.Minute || c.Port != 10250 ||
		c.EvictionHard["memory.available"] != "100Mi" || c.Kind != "" {
		t.Errorf("configz: %s", b)
	}
}

// TestSettingsBuildAnAgent: the Options of a full configuration pass
// nodekit.New's checks and those of every part it builds.
func TestSettingsBuildAnAgent(t *testing.T) {
	f, err := kubeletconfig.Parse(yamlOf(t, fullConfig()))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := kubeletconfig.New(f, &kubeletconfig.Flags{RootDir: dir, HostnameOverride: "edge-1"})
	if err != nil {
		t.Fatal(err)
	}
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	o := s.Options
	o.Runtime = rt
	o.RuntimeManager.PodLogsDir = dir + "/logs"
	o.Cgroups.Disabled = true
	o.Sources = []nodekit.NamedSource{{Name: "file", Source: sources.SourceFunc(func(ctx context.Context, _ chan<- []*v1.Pod) error {
		<-ctx.Done()
		return nil
	})}}
	if _, err := nodekit.New(o); err != nil {
		t.Fatalf("New: %v", err)
	}
}
