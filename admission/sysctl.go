package admission

import (
	"fmt"
	"os"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// legacySafeSysctls are the kubelet's safe sysctls on every kernel:
// namespaced, and without effect on other pods of the node.
var legacySafeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
}

// newerSafeSysctls are safe from the kernel version that namespaced them.
var newerSafeSysctls = []struct{ name, kernel string }{
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
}

// SafeSysctls returns the kubelet's safe sysctls for a kernel version
// ("6.1.0-18-amd64"): the sysctls every kernel namespaces, plus those the
// given kernel namespaces. A version that cannot be parsed gives the
// former only, as the kubelet does.
func SafeSysctls(kernelVersion string) []string {
	safe := slices.Clone(legacySafeSysctls)
	v, err := version.ParseGeneric(strings.TrimSpace(kernelVersion))
	if err != nil {
		return safe
	}
	for _, s := range newerSafeSysctls {
		if v.AtLeast(version.MustParseGeneric(s.kernel)) {
			safe = append(safe, s.name)
		}
	}
	return safe
}

// KernelVersion returns the running kernel's release
// (/proc/sys/kernel/osrelease), or "" when it cannot be read.
func KernelVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SysctlOptions configure Sysctls.
type SysctlOptions struct {
	// AllowedUnsafe are the sysctls a pod may set beyond the safe ones,
	// as the kubelet's allowedUnsafeSysctls: names ("kernel.msgmax") or
	// prefixes ending in "*" ("kernel.msg*", "net.core.*"); "/" may
	// separate the parts. Each must be known to be namespaced (ipc, net,
	// uts or user namespace). Defaults to none.
	AllowedUnsafe []string
	// KernelVersion decides which sysctls are safe (SafeSysctls).
	// Defaults to the running kernel's (KernelVersion).
	KernelVersion string
}

// Sysctls is the kubelet's sysctl check: every sysctl of the pod's
// security context must be safe (SafeSysctls) or allowed
// (AllowedUnsafe), else the pod is rejected with reason SysctlForbidden
// and `forbidden sysctl: "kernel.msgmax" not allowlisted`. A sysctl of
// the network namespace in a hostNetwork pod, or of the IPC namespace in a
// hostIPC pod, would change the node's: it is rejected with
// `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host
// Net enabled`. On another OS than Linux no sysctl is safe.
//
// It fails when an allowed sysctl is not a valid name or pattern or is
// not known to be namespaced, as the kubelet refuses to start.
func Sysctls(opts SysctlOptions) (Handler, error) {
	var safe []string
	if goruntime.GOOS == "linux" {
		kv := opts.KernelVersion
		if kv == "" {
			kv = KernelVersion()
		}
		safe = SafeSysctls(kv)
	}
	return newSysctls(append(safe, opts.AllowedUnsafe...))
}

// sysctlPattern is a sysctl name with "." or "/" separators, optionally
// ending in "*".
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9]([-_a-z0-9]*[a-z0-9])?\*?|\*)$`)

// sysctlMaxLength is the API's limit on a sysctl name.
const sysctlMaxLength = 253

type sysctlAllowlist struct {
	names    map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

func newSysctls(patterns []string) (Handler, error) {
	w := &sysctlAllowlist{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, s := range patterns {
		if len(s) > sysctlMaxLength || !sysctlPattern.MatchString(s) {
			return nil, fmt.Errorf("admission: sysctl %q must have at most %d characters and match the regex %s", s, sysctlMaxLength, sysctlPattern)
		}
		ns, name, prefixed := utilsysctl.GetNamespace(s)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("admission: the sysctls %q are not known to be namespaced", name)
		}
		if prefixed {
			w.prefixes[name] = ns
		} else {
			w.names[name] = ns
		}
	}
	return Func(w.admit), nil
}

func (w *sysctlAllowlist) admit(pod *v1.Pod, _ []*v1.Pod) Result {
	if pod.Spec.SecurityContext == nil {
		return Admitted()
	}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		if err := w.validate(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != "" {
			return Result{Reason: ReasonSysctlForbidden, Message: "forbidden sysctl: " + err}
		}
	}
	return Admitted()
}

func (w *sysctlAllowlist) validate(sysctl string, hostNet, hostIPC bool) string {
	sysctl = utilsysctl.NormalizeName(sysctl)
	check := func(ns utilsysctl.Namespace) string {
		if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) {
			return fmt.Sprintf("%q not allowed with host %s enabled", sysctl, ns)
		}
		return ""
	}
	if ns, ok := w.names[sysctl]; ok {
		return check(ns)
	}
	// The longest prefix decides, so that the answer does not depend on
	// map order.
	best, found := "", false
	for p := range w.prefixes {
		if strings.HasPrefix(sysctl, p) && (!found || len(p) > len(best)) {
			best, found = p, true
		}
	}
	if found {
		return check(w.prefixes[best])
	}
	return fmt.Sprintf("%q not allowlisted", sysctl)
}
