package podruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/env"
	"github.com/nodekit/nodekit/internal/expansion"
	"github.com/nodekit/nodekit/runtime"
)

// podFullName is the kubelet's format.Pod: name_namespace(uid).
func podFullName(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// containerLogPath is the log path of a container instance, relative to
// the sandbox's log directory.
func containerLogPath(container string, restartCount int) string {
	return filepath.Join(container, strconv.Itoa(restartCount)+".log")
}

// ContainerLogPath is the log path the Manager gave container cs of the
// pod (what the runtime reports as the container's log_path):
// <PodLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log.
func (m *Manager) ContainerLogPath(pod *runtime.PodStatus, cs *runtime.ContainerStatus) string {
	return filepath.Join(m.PodLogDir(pod), containerLogPath(cs.Name, cs.RestartCount))
}

// PodLogDir is the pod's log directory, the sandbox's log_directory:
// <PodLogsDir>/<namespace>_<name>_<uid>.
func (m *Manager) PodLogDir(pod *runtime.PodStatus) string {
	return runtime.PodLogsDirectory(m.opts.PodLogsDir, pod.Namespace, pod.Name, pod.ID)
}

// restartCountFromLogDir returns one more than the highest <n>.log in dir,
// or 0: the restart count of a container whose previous instances the
// runtime forgot (the kubelet's calcRestartCountByLogDir).
func restartCountFromLogDir(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(base); err == nil && i+1 > n {
			n = i + 1
		}
	}
	return n
}

func podLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[runtime.LabelPodName] = pod.Name
	l[runtime.LabelPodNamespace] = pod.Namespace
	l[runtime.LabelPodUID] = string(pod.UID)
	return l
}

func podAnnotations(pod *v1.Pod) map[string]string {
	a := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		a[k] = v
	}
	return a
}

func containerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		runtime.LabelPodName:       pod.Name,
		runtime.LabelPodNamespace:  pod.Namespace,
		runtime.LabelPodUID:        string(pod.UID),
		runtime.LabelContainerName: c.Name,
		runtime.LabelContainerHash: runtime.HashContainer(c),
	}
}

// terminationGracePeriod is the pod's grace period in seconds: the deletion
// grace period when the pod is being deleted, else the spec's, else the API
// default of 30.
func terminationGracePeriod(pod *v1.Pod) int64 {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// The annotations the pod runtime puts on a container besides those of
// package runtime: the kubelet's keys, read back to stop the container
// (its grace period) and to read its termination message.
const (
	annotationTerminationMessagePath    = "io.kubernetes.container.terminationMessagePath"
	annotationTerminationMessagePolicy  = "io.kubernetes.container.terminationMessagePolicy"
	annotationPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	annotationContainerIndex            = "io.kubernetes.container.index"
)

func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int, index int, typ string) map[string]string {
	a := map[string]string{
		runtime.AnnotationRestartCount:      strconv.Itoa(restartCount),
		annotationTerminationMessagePath:    c.TerminationMessagePath,
		annotationTerminationMessagePolicy:  string(c.TerminationMessagePolicy),
		annotationPodTerminationGracePeriod: strconv.FormatInt(terminationGracePeriod(pod), 10),
		annotationContainerIndex:            strconv.Itoa(index),
		runtime.AnnotationContainerType:     typ,
	}
	recordOrphanSpec(a, c)
	return a
}

func protocolToCRI(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{
		Network: runtime.NetworkNamespaceMode(pod),
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		o.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	return o
}

// podHostname is the kubelet's hostname of a pod: spec.hostnameOverride,
// else spec.hostname, else the pod name, cut to 63 characters (without a
// trailing '-' or '.').
func podHostname(pod *v1.Pod) string {
	h := pod.Name
	switch {
	case pod.Spec.HostnameOverride != nil:
		h = *pod.Spec.HostnameOverride
	case pod.Spec.Hostname != "":
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// sandboxConfig builds the PodSandboxConfig of the pod (kubelet
// generatePodSandboxConfig), and returns the Warning events (reason,
// message) its DNS configuration gives rise to.
func (m *Manager) sandboxConfig(pod *v1.Pod, attempt uint32, cgroupParent string) (*runtimeapi.PodSandboxConfig, [][2]string) {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		LogDirectory: runtime.PodLogsDirectory(m.opts.PodLogsDir, pod.Namespace, pod.Name, pod.UID),
		Labels:       podLabels(pod),
		Annotations:  podAnnotations(pod),
	}
	cfg.Hostname = m.sandboxHostname(pod)
	var warnings [][2]string
	cfg.DnsConfig, warnings = m.podDNSConfig(pod)
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol:      protocolToCRI(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
	}
	for i := range pod.Spec.Containers {
		if c := pod.Spec.Containers[i].SecurityContext; c != nil && c.Privileged != nil && *c.Privileged {
			sc.Privileged = true
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := pod.Spec.InitContainers[i].SecurityContext; c != nil && c.Privileged != nil && *c.Privileged {
			sc.Privileged = true
		}
	}
	m.completeSandboxSecurity(sc, pod)
	linux := &runtimeapi.LinuxPodSandboxConfig{CgroupParent: cgroupParent, SecurityContext: sc}
	if psc := pod.Spec.SecurityContext; psc != nil && len(psc.Sysctls) > 0 {
		linux.Sysctls = map[string]string{}
		for _, s := range psc.Sysctls {
			linux.Sysctls[s.Name] = s.Value
		}
	}
	cfg.Linux = linux
	return cfg, warnings
}

// Mount is one mount of a container, resolved on the host.
type Mount struct {
	ContainerPath string
	HostPath      string
	ReadOnly      bool
	// Propagation defaults to None (private).
	Propagation v1.MountPropagationMode
}

// MountsFunc returns the mounts of container c of pod; env holds the
// container's resolved environment (for subPathExpr).
type MountsFunc func(pod *v1.Pod, c *v1.Container, env map[string]string) ([]Mount, error)

// containerSpec is one container to start.
type containerSpec struct {
	container *v1.Container
	index     int
	typ       string
	// ephemeral is the ephemeral container, when the container is one.
	ephemeral *v1.EphemeralContainer
	// targetID is the runtime ID of the container whose PID namespace
	// an ephemeral container joins ("" for none).
	targetID string
	// newLogDir: the sync that starts the container made the pod's log
	// directory, so it holds no log of an earlier instance to count.
	newLogDir bool
}

// expandCommand expands the $(VAR) references of the container's command
// and args against its environment vars; $$ escapes a $. Each element is
// bounded at expansion.MaxValueBytes and the command line as a whole at
// expansion.MaxTotalBytes; past either, the error names the element.
func expandCommand(c *v1.Container, vars map[string]string) (command, args []string, err error) {
	budget := expansion.NewBudget("the command line", expansion.MaxTotalBytes)
	lookup := expansion.Map(vars)
	expand := func(field string, in []string) ([]string, error) {
		if len(in) == 0 {
			return nil, nil
		}
		out := make([]string, len(in))
		for i, s := range in {
			v, err := budget.Expand(s, lookup, expansion.MaxValueBytes, 0)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
			}
			out[i] = v
		}
		return out, nil
	}
	if command, err = expand("command", c.Command); err != nil {
		return nil, nil, err
	}
	if args, err = expand("args", c.Args); err != nil {
		return nil, nil, err
	}
	return command, args, nil
}

// containerEnv resolves the container's environment with the Manager's
// EnvResolver.
func (m *Manager) containerEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.KeyValue, map[string]string, error) {
	vars, err := m.opts.Env.Container(ctx, pod, c, podIPs)
	if err != nil {
		return nil, nil, err
	}
	kv := make([]*runtimeapi.KeyValue, len(vars))
	for i, v := range vars {
		kv[i] = &runtimeapi.KeyValue{Key: v.Name, Value: []byte(v.Value)}
	}
	return kv, env.Map(vars), nil
}

// containerMounts turns the container's mounts, as f resolves them, into
// CRI mounts.
func containerMounts(pod *v1.Pod, c *v1.Container, env map[string]string, f MountsFunc) ([]*runtimeapi.Mount, error) {
	if len(c.VolumeMounts) == 0 {
		return nil, nil
	}
	if f == nil {
		return nil, fmt.Errorf("container %s mounts volumes, but no volume manager prepared them", c.Name)
	}
	resolved, err := f(pod, c, env)
	if err != nil {
		return nil, err
	}
	mounts := make([]*runtimeapi.Mount, 0, len(resolved))
	for _, r := range resolved {
		m := &runtimeapi.Mount{ContainerPath: r.ContainerPath, HostPath: r.HostPath, Readonly: r.ReadOnly}
		switch r.Propagation {
		case v1.MountPropagationHostToContainer:
			m.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
		case v1.MountPropagationBidirectional:
			m.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// linuxResources converts the container's cpu and memory to CRI resources
// (shares from the request, CFS quota and memory from the limits), with
// the CFS period periodUS in microseconds.
func linuxResources(c *v1.Container, periodUS int64) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq := c.Resources.Requests.Cpu().MilliValue()
	cpuLim := c.Resources.Limits.Cpu().MilliValue()
	if cpuReq == 0 && cpuLim != 0 {
		cpuReq = cpuLim
	}
	r.CpuShares = milliCPUToShares(cpuReq)
	if cpuLim != 0 {
		r.CpuPeriod = periodUS
		r.CpuQuota = max(cpuLim*periodUS/1000, 1000)
	}
	r.MemoryLimitInBytes = c.Resources.Limits.Memory().Value()
	return r
}

func milliCPUToShares(milli int64) int64 {
	const minShares, maxShares = 2, 262144
	if milli == 0 {
		return minShares
	}
	s := milli * 1024 / 1000
	return min(max(s, minShares), maxShares)
}

func containerSecurityContext(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
		}
		if csc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
		}
		if csc.Privileged != nil {
			sc.Privileged = *csc.Privileged
		}
		if csc.ReadOnlyRootFilesystem != nil {
			sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
		}
		if csc.AllowPrivilegeEscalation != nil {
			sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
		}
		if caps := csc.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, a := range caps.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range caps.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
			}
		}
	}
	return sc
}

// containerConfig builds the ContainerConfig of one container instance
// (kubelet generateContainerConfig, reduced).
func (m *Manager) containerConfig(ctx context.Context, pod *v1.Pod, spec containerSpec, restartCount int, imageRef string, podIPs []string, mountsFunc MountsFunc, cfsPeriodUS int64) (*runtimeapi.ContainerConfig, error) {
	c := spec.container
	envs, vars, err := m.containerEnv(ctx, pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	mounts, err := containerMounts(pod, c, vars, mountsFunc)
	if err != nil {
		return nil, err
	}
	if tm := m.terminationMessageMount(pod, c); tm != nil {
		mounts = append(mounts, tm)
	}
	hm, err := m.hostsMount(pod, c, podIPs)
	if err != nil {
		return nil, fmt.Errorf("cannot write the pod's /etc/hosts: %w", err)
	}
	if hm != nil {
		mounts = append(mounts, hm)
	}
	command, args, err := expandCommand(c, vars)
	if err != nil {
		return nil, err
	}
	security := m.containerSecurity(pod, c)
	withTargetNamespace(security, spec.targetID)
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image: &runtimeapi.ImageSpec{
			Image:              imageRef,
			UserSpecifiedImage: c.Image,
			RuntimeHandler:     m.opts.RuntimeHandler,
		},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Mounts:      mounts,
		LogPath:     containerLogPath(c.Name, restartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, restartCount, spec.index, spec.typ),
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       linuxResources(c, cfsPeriodUS),
			SecurityContext: security,
		},
	}, nil
}

// containerSecurity is the container's full security context.
func (m *Manager) containerSecurity(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := containerSecurityContext(pod, c)
	m.completeContainerSecurity(sc, pod, c)
	return sc
}

// pullPolicy returns the container's pull policy, defaulted as the API
// server does: Always for an image without a tag or tagged latest (and no
// digest), IfNotPresent otherwise.
func pullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	img := c.Image
	if strings.Contains(img, "@") {
		return v1.PullIfNotPresent
	}
	last := img[strings.LastIndex(img, "/")+1:]
	i := strings.LastIndex(last, ":")
	if i < 0 || last[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
