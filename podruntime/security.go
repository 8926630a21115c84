package podruntime

import (
	"context"
	"errors"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ErrUserNamespaces is the error of a pod with hostUsers: false on a
// Manager without Options.UserNamespaces: nothing allocates its
// user-namespace ID mappings, so its sandbox is not created.
var ErrUserNamespaces = errors.New("hostUsers: false (user namespaces) is not supported: no user namespace manager (podruntime.Options.UserNamespaces)")

// UserNamespaces gives each pod the user namespace of its sandbox and
// containers: the node's (mode NODE) or, for hostUsers: false, the pod's
// own ID mappings (mode POD), for the pod's runtime handler. An error
// fails the sandbox (FailedCreatePodSandBox) or the container
// (CreateContainerConfigError) with its message. *userns.Manager
// implements it.
type UserNamespaces interface {
	PodUserNamespace(ctx context.Context, pod *v1.Pod, runtimeHandler string) (*runtimeapi.UserNamespace, error)
}

// The kubelet's default masked and read-only paths of a container's /proc
// and /sys (procMount Default); procMount Unmasked clears both.
var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// userNamespace is the pod's CRI user namespace on runtimeHandler, as the
// kubelet's namespacesForPod: from Options.UserNamespaces; without
// it, none (the runtime's default) or ErrUserNamespaces for hostUsers:
// false.
func (m *Manager) userNamespace(ctx context.Context, pod *v1.Pod, runtimeHandler string) (*runtimeapi.UserNamespace, error) {
	if m.opts.UserNamespaces != nil {
		return m.opts.UserNamespaces.PodUserNamespace(ctx, pod, runtimeHandler)
	}
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		return nil, ErrUserNamespaces
	}
	return nil, nil
}

// setUserNamespace puts the pod's user namespace into the namespace
// options of its sandbox config and, when given, of a container's, whose
// mounts get its ID mappings.
func (m *Manager) setUserNamespace(ctx context.Context, pod *v1.Pod, sandbox *runtimeapi.PodSandboxConfig, ctr *runtimeapi.ContainerConfig) error {
	handler, err := m.podRuntimeHandler(pod)
	if err != nil {
		return err
	}
	ns, err := m.userNamespace(ctx, pod, handler)
	if err != nil {
		return err
	}
	if o := sandbox.GetLinux().GetSecurityContext().GetNamespaceOptions(); o != nil {
		o.UsernsOptions = ns
	}
	if o := ctr.GetLinux().GetSecurityContext().GetNamespaceOptions(); o != nil {
		o.UsernsOptions = ns
		// Every mount of a container in a user namespace is idmapped
		// with the pod's mappings (mode NODE has none), as the kubelet's
		// applyPlatformSpecificContainerConfig: files owned by an ID on
		// the host show as that ID in the container.
		if ns != nil {
			for _, mt := range ctr.GetMounts() {
				mt.UidMappings, mt.GidMappings = ns.GetUids(), ns.GetGids()
			}
		}
	}
	return nil
}

// seccompProfile converts a seccomp profile as the kubelet does: the
// container's, else the pod's; unset is Unconfined (the kubelet's default
// without SeccompDefault); a Localhost profile is a file under
// <RootDir>/seccomp.
func (m *Manager) seccompProfile(pod, ctr *v1.SeccompProfile) *runtimeapi.SecurityProfile {
	p := ctr
	if p == nil {
		p = pod
	}
	if p == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case v1.SeccompProfileTypeLocalhost:
		ref := ""
		if p.LocalhostProfile != nil {
			ref = filepath.Join(m.opts.RootDir, "seccomp", *p.LocalhostProfile)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

// appArmorProfile converts an AppArmor profile: the container's, else the
// pod's; nil (the runtime's default) when neither sets one.
func appArmorProfile(pod, ctr *v1.AppArmorProfile) *runtimeapi.SecurityProfile {
	p := ctr
	if p == nil {
		p = pod
	}
	if p == nil {
		return nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case v1.AppArmorProfileTypeLocalhost:
		ref := ""
		if p.LocalhostProfile != nil {
			ref = *p.LocalhostProfile
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

func seLinux(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

func groupsPolicy(psc *v1.PodSecurityContext) runtimeapi.SupplementalGroupsPolicy {
	if psc != nil && psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}

// completeContainerSecurity adds to sc what the kubelet's
// determineEffectiveSecurityContext adds beyond users, groups,
// capabilities and flags: seccomp and AppArmor profiles, SELinux options
// (the container's, else the pod's), the supplemental groups policy and
// the /proc masks of procMount.
func (m *Manager) completeContainerSecurity(sc *runtimeapi.LinuxContainerSecurityContext, pod *v1.Pod, c *v1.Container) {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &v1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &v1.SecurityContext{}
	}
	sc.Seccomp = m.seccompProfile(psc.SeccompProfile, csc.SeccompProfile)
	sc.Apparmor = appArmorProfile(psc.AppArmorProfile, csc.AppArmorProfile)
	if o := seLinux(csc.SELinuxOptions); o != nil {
		sc.SelinuxOptions = o
	} else {
		sc.SelinuxOptions = seLinux(psc.SELinuxOptions)
	}
	sc.SupplementalGroupsPolicy = groupsPolicy(pod.Spec.SecurityContext)
	if csc.ProcMount != nil && *csc.ProcMount == v1.UnmaskedProcMount {
		sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
	} else if !sc.Privileged {
		sc.MaskedPaths, sc.ReadonlyPaths = defaultMaskedPaths, defaultReadonlyPaths
	}
}

// completeSandboxSecurity adds the pod-level seccomp profile, SELinux
// options and supplemental groups policy to the sandbox's context.
func (m *Manager) completeSandboxSecurity(sc *runtimeapi.LinuxSandboxSecurityContext, pod *v1.Pod) {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &v1.PodSecurityContext{}
	}
	sc.Seccomp = m.seccompProfile(psc.SeccompProfile, nil)
	sc.SelinuxOptions = seLinux(psc.SELinuxOptions)
	sc.SupplementalGroupsPolicy = groupsPolicy(pod.Spec.SecurityContext)
}
