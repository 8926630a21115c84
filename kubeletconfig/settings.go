package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/nodeserver"
)

// defaultEvictionHard is the kubelet's evictionHard on Linux when the file
// does not set it.
var defaultEvictionHard = map[string]string{
	"memory.available":   "100Mi",
	"nodefs.available":   "10%",
	"nodefs.inodesFree":  "5%",
	"imagefs.available":  "15%",
	"imagefs.inodesFree": "5%",
}

// Settings are what a KubeletConfiguration file and the kubelet's flags
// ask of an agent, mapped onto nodekit.
type Settings struct {
	// Config is the effective configuration: the file's fields nodekit
	// acts on, defaulted as the kubelet's, with the flags applied over
	// them.
	Config Configuration
	// Options hold the node's name, root directory, Node settings and
	// the tuning of the default parts. The caller adds the parts:
	// Runtime, Sources (Config.StaticPodPath, Config.StaticPodURL),
	// KubeClient, NodeServer and Logger.
	Options nodekit.Options
	// Server configures the node API (nodeserver.New) when
	// Config.EnableServer; its Registry and Streamer are the caller's.
	Server nodeserver.Options
	// Kubeconfig, BootstrapKubeconfig and CertDir are the flags'.
	Kubeconfig, BootstrapKubeconfig, CertDir string
	// Unsupported names, sorted, the fields of the file that nodekit
	// does not act on and that ask for something other than what it
	// does: featureGates[Name], cgroupDriver, authorization.mode, ...;
	// fields KubeletConfiguration does not have end in "(unknown
	// field)". The agent logs them once at start.
	Unsupported []string

	raw map[string]any
}

// Load reads the file the flags name (--config; none: the kubelet's
// defaults) and returns the settings, as New.
func Load(fl *Flags) (*Settings, error) {
	var f *File
	if fl.Config != "" {
		var err error
		if f, err = ReadFile(fl.Config); err != nil {
			return nil, err
		}
	}
	return New(f, fl)
}

// New returns the settings of f (nil: an empty file) with the flags
// given over it, as the kubelet: flags over the file, then the kubelet's
// defaults. A value nodekit cannot use fails with the field's path, e.g.
// "kubeletconfig: evictionHard[memory.available]: ...".
func New(f *File, fl *Flags) (*Settings, error) {
	if fl == nil {
		fl = &Flags{}
	}
	s := &Settings{raw: map[string]any{}}
	if f != nil {
		s.Config = f.Config
		s.raw = f.Raw
		s.Unsupported = unsupported(f.Raw)
	}
	c := &s.Config
	if c.EvictionHard == nil {
		c.EvictionHard = maps.Clone(defaultEvictionHard)
	} else if c.MergeDefaultEvictionSettings != nil && *c.MergeDefaultEvictionSettings {
		for k, v := range defaultEvictionHard {
			if _, ok := c.EvictionHard[k]; !ok {
				c.EvictionHard[k] = v
			}
		}
	}
	for _, set := range fl.overrides {
		set(c)
	}
	SetDefaults(c)
	if err := s.options(fl); err != nil {
		return nil, fmt.Errorf("kubeletconfig: %w", err)
	}
	return s, nil
}

// options maps s.Config and the flags onto s.Options and s.Server.
func (s *Settings) options(fl *Flags) error {
	c, o := &s.Config, &s.Options
	o.NodeName = strings.ToLower(strings.TrimSpace(fl.HostnameOverride))
	o.RootDir = fl.RootDir
	s.Kubeconfig, s.BootstrapKubeconfig, s.CertDir = fl.Kubeconfig, fl.BootstrapKubeconfig, fl.CertDir
	if s.CertDir == "" && o.RootDir != "" {
		s.CertDir = filepath.Join(o.RootDir, "pki")
	}
	if fl.NodeIP != "" {
		ip := net.ParseIP(fl.NodeIP)
		if ip == nil {
			return fmt.Errorf("--node-ip: %q is not an IP address", fl.NodeIP)
		}
		o.Node.InternalIP = ip
	}
	o.Node.Labels = maps.Clone(fl.NodeLabels)

	// Pods and their sync.
	if err := positive("syncFrequency", c.SyncFrequency.Duration); err != nil {
		return err
	}
	o.ResyncInterval = c.SyncFrequency.Duration
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"fileCheckFrequency", c.FileCheckFrequency.Duration}, {"httpCheckFrequency", c.HTTPCheckFrequency.Duration}} {
		if err := positive(d.name, d.d); err != nil {
			return err
		}
	}
	if !filepath.IsAbs(c.PodLogsDir) {
		return fmt.Errorf("podLogsDir: %q is not an absolute path", c.PodLogsDir)
	}
	o.RuntimeManager.PodLogsDir = c.PodLogsDir
	if c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls < 1 {
		return fmt.Errorf("maxParallelImagePulls: %d is less than 1", *c.MaxParallelImagePulls)
	}
	switch {
	case *c.SerializeImagePulls && c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls > 1:
		return errors.New("maxParallelImagePulls: more than 1 needs serializeImagePulls: false")
	case *c.SerializeImagePulls:
		o.RuntimeManager.MaxParallelImagePulls = 1
	case c.MaxParallelImagePulls != nil:
		o.RuntimeManager.MaxParallelImagePulls = int(*c.MaxParallelImagePulls)
	default:
		o.RuntimeManager.MaxParallelImagePulls = 1 << 10 // unbounded in the kubelet; pods bound it
	}
	if m := c.CrashLoopBackOff.MaxContainerRestartPeriod; m != nil {
		if m.Duration < time.Second || m.Duration > 300*time.Second {
			return fmt.Errorf("crashLoopBackOff.maxContainerRestartPeriod: %v is not between 1s and 300s", m.Duration)
		}
		o.RuntimeManager.BackOff.Max = m.Duration
		if m.Duration < 10*time.Second {
			o.RuntimeManager.BackOff.Initial = m.Duration
		}
	}
	for i, d := range c.ClusterDNS {
		if net.ParseIP(d) == nil {
			return fmt.Errorf("clusterDNS[%d]: %q is not an IP address", i, d)
		}
	}
	o.RuntimeManager.DNS.ClusterDNS = slices.Clone(c.ClusterDNS)
	o.RuntimeManager.DNS.ClusterDomain = c.ClusterDomain
	if *c.ResolverConfig == "" {
		s.Unsupported = append(s.Unsupported, `resolvConf: ""`)
	} else {
		o.RuntimeManager.DNS.ResolvConf = *c.ResolverConfig
	}
	o.AllowedUnsafeSysctls = slices.Clone(c.AllowedUnsafeSysctls)
	if u := c.UserNamespaces; u != nil && u.IDsPerPod != nil {
		n := *u.IDsPerPod
		if n <= 0 || n%65536 != 0 || n > 1<<32-1 {
			return fmt.Errorf("userNamespaces.idsPerPod: %d is not a positive multiple of 65536", n)
		}
		o.UserNamespaces.IDsPerPod = uint32(n)
	}

	// The node.
	if c.MaxPods < 0 {
		return fmt.Errorf("maxPods: %d is negative", c.MaxPods)
	}
	o.Node.MaxPods = int(c.MaxPods)
	for i, t := range c.RegisterWithTaints {
		if t.Key == "" {
			return fmt.Errorf("registerWithTaints[%d]: no key", i)
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("registerWithTaints[%d]: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", i, t.Effect)
		}
	}
	o.Node.Taints = slices.Clone(c.RegisterWithTaints)
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"nodeStatusUpdateFrequency", c.NodeStatusUpdateFrequency.Duration}, {"nodeStatusReportFrequency", c.NodeStatusReportFrequency.Duration}} {
		if err := positive(d.name, d.d); err != nil {
			return err
		}
	}
	o.Node.StatusUpdateFrequency = c.NodeStatusUpdateFrequency.Duration
	o.Node.StatusReportFrequency = c.NodeStatusReportFrequency.Duration
	if c.NodeLeaseDurationSeconds <= 0 {
		return fmt.Errorf("nodeLeaseDurationSeconds: %d is not positive", c.NodeLeaseDurationSeconds)
	}
	o.Node.LeaseDuration = time.Duration(c.NodeLeaseDurationSeconds) * time.Second

	// Cgroups: the pods' under <cgroupRoot>/kubepods, as the kubelet's
	// with cgroupsPerQOS.
	if r := strings.Trim(c.CgroupRoot, "/"); r != "" {
		if strings.Contains(r, "..") {
			return fmt.Errorf("cgroupRoot: %q climbs out of the cgroup root", c.CgroupRoot)
		}
		o.Cgroups.Root = r + "/kubepods"
	}
	o.Cgroups.DisableCPUQuota = !*c.CPUCFSQuota
	if p := c.CPUCFSQuotaPeriod.Duration; p < time.Millisecond || p > time.Second {
		return fmt.Errorf("cpuCFSQuotaPeriod: %v is not between 1ms and 1s", p)
	}
	o.Cgroups.CPUCFSQuotaPeriod = c.CPUCFSQuotaPeriod.Duration
	if *c.PodPidsLimit > 0 {
		o.Cgroups.PodPidsLimit = *c.PodPidsLimit
	}

	// What keeps the node alive.
	nr := &o.NodeResources
	var err error
	if nr.SystemReserved, err = resources("systemReserved", c.SystemReserved); err != nil {
		return err
	}
	if nr.KubeReserved, err = resources("kubeReserved", c.KubeReserved); err != nil {
		return err
	}
	switch {
	case len(c.EnforceNodeAllocatable) == 0 || slices.Equal(c.EnforceNodeAllocatable, []string{"none"}):
		nr.SkipAllocatableEnforcement = true
	default:
		for i, e := range c.EnforceNodeAllocatable {
			switch e {
			case "pods":
			case "system-reserved", "kube-reserved", "system-reserved-compressible", "kube-reserved-compressible":
				s.Unsupported = append(s.Unsupported, fmt.Sprintf("enforceNodeAllocatable[%d]: %s", i, e))
			default:
				return fmt.Errorf("enforceNodeAllocatable[%d]: unknown %q", i, e)
			}
		}
	}
	thresholds, err := thresholds(c)
	if err != nil {
		return err
	}
	ev := &nr.Eviction.Manager
	ev.Thresholds = thresholds
	if thresholds == nil {
		ev.Thresholds = []eviction.Threshold{} // evictionHard: {}: none
	}
	if err := positive("evictionPressureTransitionPeriod", c.EvictionPressureTransitionPeriod.Duration); err != nil {
		return err
	}
	ev.PressureTransitionPeriod = c.EvictionPressureTransitionPeriod.Duration
	if c.EvictionMaxPodGracePeriod < 0 {
		return fmt.Errorf("evictionMaxPodGracePeriod: %d is negative", c.EvictionMaxPodGracePeriod)
	}
	ev.MaxPodGracePeriodSeconds = int64(c.EvictionMaxPodGracePeriod)
	ev.DisableLocalStorageEviction = !*c.LocalStorageCapacityIsolation
	hi, lo := *c.ImageGCHighThresholdPercent, *c.ImageGCLowThresholdPercent
	switch {
	case hi < 0 || hi > 100:
		return fmt.Errorf("imageGCHighThresholdPercent: %d is not between 0 and 100", hi)
	case lo < 0 || lo > 100:
		return fmt.Errorf("imageGCLowThresholdPercent: %d is not between 0 and 100", lo)
	case lo > hi:
		return fmt.Errorf("imageGCLowThresholdPercent: %d is above imageGCHighThresholdPercent (%d)", lo, hi)
	}
	ip := &nr.GC.Images.Policy
	ip.HighThresholdPercent, ip.LowThresholdPercent = int(hi), int(lo)
	if c.ImageMinimumGCAge.Duration < 0 || c.ImageMaximumGCAge.Duration < 0 {
		return errors.New("imageMinimumGCAge, imageMaximumGCAge: negative")
	}
	if m := c.ImageMaximumGCAge.Duration; m != 0 && m <= c.ImageMinimumGCAge.Duration {
		return fmt.Errorf("imageMaximumGCAge: %v is not above imageMinimumGCAge (%v)", m, c.ImageMinimumGCAge.Duration)
	}
	ip.MinAge, ip.MaxAge = c.ImageMinimumGCAge.Duration, c.ImageMaximumGCAge.Duration
	size, err := resource.ParseQuantity(c.ContainerLogMaxSize)
	if err != nil || size.Sign() < 0 {
		return fmt.Errorf("containerLogMaxSize: %q is not a size", c.ContainerLogMaxSize)
	}
	if *c.ContainerLogMaxFiles < 2 {
		return fmt.Errorf("containerLogMaxFiles: %d is less than 2", *c.ContainerLogMaxFiles)
	}
	if err := positive("containerLogMonitorInterval", c.ContainerLogMonitorInterval.Duration); err != nil {
		return err
	}
	lr := &nr.LogRotation
	lr.MaxSize, lr.MaxFiles, lr.Period = size, int(*c.ContainerLogMaxFiles), c.ContainerLogMonitorInterval.Duration

	// The node API.
	sv := &s.Server
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("port: %d is not between 1 and 65535", c.Port)
	}
	if ip := net.ParseIP(c.Address); ip == nil {
		return fmt.Errorf("address: %q is not an IP address", c.Address)
	} else if !ip.IsUnspecified() {
		sv.Address = c.Address
	}
	sv.Port = int(c.Port)
	if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
		return errors.New("tlsCertFile, tlsPrivateKeyFile: both or neither")
	}
	if c.TLSCertFile != "" && c.ServerTLSBootstrap {
		return errors.New("serverTLSBootstrap: not with tlsCertFile")
	}
	sv.CertFile, sv.KeyFile = c.TLSCertFile, c.TLSPrivateKeyFile
	sv.ServerTLSBootstrap = c.ServerTLSBootstrap
	sv.CertDir = s.CertDir
	sv.ClientCAFile = c.Authentication.X509.ClientCAFile
	sv.NoClusterClientCA = true // the kubelet's: no clientCAFile, no client certificates
	sv.Anonymous = *c.Authentication.Anonymous.Enabled
	if *c.KubeAPIQPS < 0 || c.KubeAPIBurst < 0 {
		return errors.New("kubeAPIQPS, kubeAPIBurst: negative")
	}
	slices.Sort(s.Unsupported)
	return nil
}

// thresholds parses the eviction thresholds, each with its field's path
// in an error.
func thresholds(c *Configuration) ([]eviction.Threshold, error) {
	check := func(field string, m map[string]string, cfg func(k, v string) eviction.Config) error {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if _, err := eviction.ParseThresholds(cfg(k, m[k])); err != nil {
				return fmt.Errorf("%s[%s]: %w", field, k, err)
			}
		}
		return nil
	}
	none := map[string]string{}
	if err := check("evictionHard", c.EvictionHard, func(k, v string) eviction.Config {
		return eviction.Config{Hard: map[string]string{k: v}}
	}); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(c.EvictionSoftGracePeriod)) {
		if _, ok := c.EvictionSoft[k]; !ok {
			return nil, fmt.Errorf("evictionSoftGracePeriod[%s]: no evictionSoft threshold for it", k)
		}
	}
	if err := check("evictionSoft", c.EvictionSoft, func(k, v string) eviction.Config {
		g, ok := c.EvictionSoftGracePeriod[k]
		if !ok {
			g = "" // reported as missing
		}
		return eviction.Config{Hard: none, Soft: map[string]string{k: v}, SoftGracePeriod: map[string]string{k: g}}
	}); err != nil {
		return nil, err
	}
	if err := check("evictionMinimumReclaim", c.EvictionMinimumReclaim, func(k, v string) eviction.Config {
		return eviction.Config{Hard: none, MinimumReclaim: map[string]string{k: v}}
	}); err != nil {
		return nil, err
	}
	t, err := eviction.ParseThresholds(eviction.Config{Hard: c.EvictionHard, Soft: c.EvictionSoft,
		SoftGracePeriod: c.EvictionSoftGracePeriod, MinimumReclaim: c.EvictionMinimumReclaim})
	if err != nil {
		return nil, fmt.Errorf("evictionHard: %w", err)
	}
	if err := eviction.Validate(t); err != nil {
		return nil, fmt.Errorf("evictionHard: %w", err)
	}
	return t, nil
}

func resources(field string, m map[string]string) (v1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	l := v1.ResourceList{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		q, err := resource.ParseQuantity(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s[%s]: %q: %w", field, k, m[k], err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s[%s]: %q is negative", field, k, m[k])
		}
		l[v1.ResourceName(k)] = q
	}
	return l, nil
}

func positive(field string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s: %v is not positive", field, d)
	}
	return nil
}

// Configz is the effective configuration as /configz serves it, the
// kubelet's form: {"kubeletconfig": {...}}, every field of the file (kind
// and apiVersion aside) with those nodekit acts on replaced by their
// effective values.
func (s *Settings) Configz() ([]byte, error) {
	// A copy of the file's values: merge changes its objects.
	b, err := json.Marshal(s.raw)
	if err != nil {
		return nil, err
	}
	eff := map[string]any{}
	if err := json.Unmarshal(b, &eff); err != nil {
		return nil, err
	}
	delete(eff, "kind")
	delete(eff, "apiVersion")
	b, err = json.Marshal(s.Config)
	if err != nil {
		return nil, err
	}
	var ours map[string]any
	if err := json.Unmarshal(b, &ours); err != nil {
		return nil, err
	}
	merge(eff, ours)
	return json.Marshal(map[string]any{"kubeletconfig": eff})
}

// merge sets src's values into dst, object by object.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}
