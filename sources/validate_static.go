package sources

import (
	"fmt"
	"math"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/userns"
)

// The API server's limits on a pod's DNS configuration.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// ValidateStatic checks a static pod (one from a manifest file or URL,
// defaulted with StaticPodDefaults) as the API server would check it on
// create, with apimachinery's validation helpers: everything Validate
// checks, and labels, annotations and the node selector, spec.hostname and
// spec.subdomain (DNS labels), the service account, priority class and
// runtime class names, activeDeadlineSeconds, the DNS policy and
// configuration, host aliases, the OS name, volumes (names unique DNS
// labels, one source each), and per container: the image without
// surrounding whitespace, the pull and termination message policies,
// ports (numbers, names, protocols, hostNetwork's hostPort rule),
// environment variable names, volume mounts (a known volume, a unique
// mount path, a relative subPath without ".."), resources (non-negative,
// requests within limits), probes (one handler; liveness and startup
// successThreshold 1), securityContext.procMount (Default, or Unmasked
// with hostUsers: false), and hostUsers: false with hostNetwork, hostPID,
// hostIPC or a container's volumeDevices (userns.ValidatePod, the API
// server's rule and message; the error matches userns.ErrHostNamespaces
// or userns.ErrVolumeDevices).
//
// It is never stricter than the API server: a pod the API server accepts
// passes (environment variable names follow the relaxed rule, any
// printable ASCII but '='). It is not the whole of the API server's
// validation (k8s.io/kubernetes' is not importable): what it skips, the
// runtime still refuses, with an error in the pod's status. Pods from the
// API server are not checked again; their server did it.
//
// It also refuses what the kubelet refuses in a static pod
// (podmodel.StaticPodForbiddenReference): spec.resourceClaims, and
// ClusterTrustBundle projections.
//
// The error names every offending field.
func ValidateStatic(pod *v1.Pod) error {
	if err := Validate(pod); err != nil {
		return err
	}
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	errs = append(errs, metav1validation.ValidateLabels(pod.Labels, meta.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(pod.Annotations, meta.Child("annotations"))...)

	spec := &pod.Spec
	sp := field.NewPath("spec")
	dnsLabel := func(v string, p *field.Path) {
		if v != "" {
			for _, msg := range validation.IsDNS1123Label(v) {
				errs = append(errs, field.Invalid(p, v, msg))
			}
		}
	}
	dnsSubdomain := func(v string, p *field.Path) {
		if v != "" {
			for _, msg := range validation.IsDNS1123Subdomain(v) {
				errs = append(errs, field.Invalid(p, v, msg))
			}
		}
	}
	dnsLabel(spec.Hostname, sp.Child("hostname"))
	dnsLabel(spec.Subdomain, sp.Child("subdomain"))
	dnsSubdomain(spec.ServiceAccountName, sp.Child("serviceAccountName"))
	dnsSubdomain(spec.PriorityClassName, sp.Child("priorityClassName"))
	if spec.RuntimeClassName != nil {
		dnsSubdomain(*spec.RuntimeClassName, sp.Child("runtimeClassName"))
	}
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, sp.Child("nodeSelector"))...)
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(sp.Child("activeDeadlineSeconds"), *d, "must be between 1 and 2147483647, inclusive"))
	}
	if spec.OS != nil && spec.OS.Name != v1.Linux && spec.OS.Name != v1.Windows {
		errs = append(errs, field.NotSupported(sp.Child("os", "name"), spec.OS.Name, []v1.OSName{v1.Linux, v1.Windows}))
	}
	errs = append(errs, validateDNS(spec, sp)...)
	for i, ha := range spec.HostAliases {
		p := sp.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIP(p.Child("ip"), ha.IP)...)
		for j, h := range ha.Hostnames {
			dnsSubdomain(h, p.Child("hostnames").Index(j))
		}
	}

	volumes := sets.New[string]()
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		p := sp.Child("volumes").Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case volumes.Has(v.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		default:
			dnsLabel(v.Name, p.Child("name"))
		}
		volumes.Insert(v.Name)
		if n := sourceCount(&v.VolumeSource); n != 1 {
			errs = append(errs, field.Invalid(p, v.Name, fmt.Sprintf("must specify exactly one volume type, not %d", n)))
		}
	}

	// The API server's default: a spec without hostUsers uses the host's.
	hostUsers := spec.HostUsers == nil || *spec.HostUsers
	cp := sp.Child("initContainers")
	for i := range spec.InitContainers {
		errs = append(errs, validateContainer(&spec.InitContainers[i], cp.Index(i), volumes, spec.HostNetwork, hostUsers)...)
	}
	cp = sp.Child("containers")
	for i := range spec.Containers {
		errs = append(errs, validateContainer(&spec.Containers[i], cp.Index(i), volumes, spec.HostNetwork, hostUsers)...)
	}
	// hostUsers: false with a host namespace or volume devices, as the API
	// server (and package userns, which fails such a pod's sandbox)
	// refuses it.
	usernsErr := userns.ValidatePod(pod)
	switch {
	case len(errs) > 0 && usernsErr != nil:
		return fmt.Errorf("sources: invalid pod %q: %w, %w", pod.Namespace+"/"+pod.Name, errs.ToAggregate(), usernsErr)
	case len(errs) > 0:
		return fmt.Errorf("sources: invalid pod %q: %w", pod.Namespace+"/"+pod.Name, errs.ToAggregate())
	case usernsErr != nil:
		return fmt.Errorf("sources: invalid pod %q: %w", pod.Namespace+"/"+pod.Name, usernsErr)
	}
	// What a static pod may not use, with no API server to resolve it.
	if err := podmodel.StaticPodForbiddenReference(pod); err != nil {
		return fmt.Errorf("sources: invalid pod %q: %w", pod.Namespace+"/"+pod.Name, err)
	}
	return nil
}

func validateDNS(spec *v1.PodSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	policies := []v1.DNSPolicy{v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone}
	switch spec.DNSPolicy {
	case "", v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault:
	case v1.DNSNone:
		if spec.DNSConfig == nil || len(spec.DNSConfig.Nameservers) == 0 {
			errs = append(errs, field.Required(sp.Child("dnsConfig", "nameservers"), "must provide at least one DNS nameserver when DNSPolicy is None"))
		}
	default:
		errs = append(errs, field.NotSupported(sp.Child("dnsPolicy"), spec.DNSPolicy, policies))
	}
	c := spec.DNSConfig
	if c == nil {
		return errs
	}
	cp := sp.Child("dnsConfig")
	if len(c.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(cp.Child("nameservers"), c.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range c.Nameservers {
		errs = append(errs, validation.IsValidIP(cp.Child("nameservers").Index(i), ns)...)
	}
	if len(c.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(cp.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if n := len(strings.Join(c.Searches, " ")); n > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(cp.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, s := range c.Searches {
		if s == "." {
			continue // the root domain, allowed by the API server
		}
		for _, msg := range validation.IsDNS1123Subdomain(strings.TrimSuffix(s, ".")) {
			errs = append(errs, field.Invalid(cp.Child("searches").Index(i), s, msg))
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(cp.Child("options").Index(i).Child("name"), "must not be empty"))
		}
	}
	return errs
}

func validateContainer(c *v1.Container, p *field.Path, volumes sets.Set[string], hostNetwork, hostUsers bool) field.ErrorList {
	var errs field.ErrorList
	if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil {
		pp := p.Child("securityContext", "procMount")
		switch *sc.ProcMount {
		case v1.DefaultProcMount:
		case v1.UnmaskedProcMount:
			if hostUsers {
				errs = append(errs, field.Invalid(pp, *sc.ProcMount, "`hostUsers` must be false to use `Unmasked`"))
			}
		default:
			errs = append(errs, field.NotSupported(pp, *sc.ProcMount, []v1.ProcMountType{v1.DefaultProcMount, v1.UnmaskedProcMount}))
		}
	}
	if c.Image != strings.TrimSpace(c.Image) {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	switch c.ImagePullPolicy {
	case "", v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever}))
	}
	switch c.TerminationMessagePolicy {
	case "", v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError:
	default:
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]v1.TerminationMessagePolicy{v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError}))
	}

	portNames := sets.New[string]()
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(pp.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if hostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
		}
		switch port.Protocol {
		case "", v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}))
		}
		if port.HostIP != "" {
			errs = append(errs, validation.IsValidIP(pp.Child("hostIP"), port.HostIP)...)
		}
	}

	for i, e := range c.Env {
		ep := p.Child("env").Index(i).Child("name")
		if e.Name == "" {
			errs = append(errs, field.Required(ep, ""))
		} else if !relaxedEnvName(e.Name) {
			errs = append(errs, field.Invalid(ep, e.Name, "a valid environment variable name must consist only of printable ASCII characters other than '='"))
		}
	}

	mountPaths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		} else if mountPaths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths.Insert(m.MountPath)
		for _, sub := range []struct{ name, v string }{{"subPath", m.SubPath}, {"subPathExpr", m.SubPathExpr}} {
			if sub.v == "" {
				continue
			}
			if path.IsAbs(sub.v) {
				errs = append(errs, field.Invalid(mp.Child(sub.name), sub.v, "must be a relative path"))
			}
			for _, part := range strings.Split(sub.v, "/") {
				if part == ".." {
					errs = append(errs, field.Invalid(mp.Child(sub.name), sub.v, "must not contain '..'"))
					break
				}
			}
		}
		if m.SubPath != "" && m.SubPathExpr != "" {
			errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
	}

	rp := p.Child("resources")
	for name, q := range c.Resources.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	for name, q := range c.Resources.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
		if l, ok := c.Resources.Limits[name]; ok && q.Cmp(l) > 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, l.String())))
		}
	}

	for _, pr := range []struct {
		name          string
		probe         *v1.Probe
		successIsOnly bool
	}{{"livenessProbe", c.LivenessProbe, true}, {"readinessProbe", c.ReadinessProbe, false}, {"startupProbe", c.StartupProbe, true}} {
		if pr.probe == nil {
			continue
		}
		pp := p.Child(pr.name)
		h := &pr.probe.ProbeHandler
		n := 0
		for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Invalid(pp, n, "must specify exactly one handler type"))
		}
		for _, f := range []struct {
			name string
			v    int32
		}{{"initialDelaySeconds", pr.probe.InitialDelaySeconds}, {"timeoutSeconds", pr.probe.TimeoutSeconds}, {"periodSeconds", pr.probe.PeriodSeconds},
			{"successThreshold", pr.probe.SuccessThreshold}, {"failureThreshold", pr.probe.FailureThreshold}} {
			if f.v < 0 {
				errs = append(errs, field.Invalid(pp.Child(f.name), f.v, "must be greater than or equal to 0"))
			}
		}
		if pr.successIsOnly && pr.probe.SuccessThreshold > 1 {
			errs = append(errs, field.Invalid(pp.Child("successThreshold"), pr.probe.SuccessThreshold, "must be 1"))
		}
	}
	return errs
}

// relaxedEnvName is the API server's environment variable name rule
// (RelaxedEnvironmentVariableValidation): printable ASCII but '='.
func relaxedEnvName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' || s[i] == '=' {
			return false
		}
	}
	return true
}

// sourceCount counts the sources set in a volume.
func sourceCount(s *v1.VolumeSource) int {
	n := 0
	for _, set := range []bool{
		s.HostPath != nil, s.EmptyDir != nil, s.GCEPersistentDisk != nil, s.AWSElasticBlockStore != nil,
		s.GitRepo != nil, s.Secret != nil, s.NFS != nil, s.ISCSI != nil, s.Glusterfs != nil,
		s.PersistentVolumeClaim != nil, s.RBD != nil, s.FlexVolume != nil, s.Cinder != nil, s.CephFS != nil,
		s.Flocker != nil, s.DownwardAPI != nil, s.FC != nil, s.AzureFile != nil, s.ConfigMap != nil,
		s.VsphereVolume != nil, s.Quobyte != nil, s.AzureDisk != nil, s.PhotonPersistentDisk != nil,
		s.Projected != nil, s.PortworxVolume != nil, s.ScaleIO != nil, s.StorageOS != nil, s.CSI != nil,
		s.Ephemeral != nil, s.Image != nil,
	} {
		if set {
			n++
		}
	}
	return n
}
