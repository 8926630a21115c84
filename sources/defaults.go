package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// API-server defaults SetDefaults applies.
const (
	// DefaultTerminationGracePeriodSeconds is the grace period a pod gets
	// when its spec names none.
	DefaultTerminationGracePeriodSeconds int64 = 30
	// DefaultTerminationMessagePath is where a container writes its
	// termination message.
	DefaultTerminationMessagePath = "/dev/termination-log"
	// DefaultSchedulerName is the scheduler a pod names when it names none.
	DefaultSchedulerName = "default-scheduler"
	// DefaultVolumeMode is the file mode of files projected from secrets,
	// config maps and the downward API when the volume names none (0644).
	DefaultVolumeMode int32 = 0o644
)

// SetDefaults fills the fields of pod that the API server would default and
// that the agent relies on. It sets only fields that are unset, so it is
// idempotent, and it is the one place nodekit defaults a pod: sources whose
// pods do not come through the API server (file, http, a custom source) call
// it before Validate.
//
// Pod level: restartPolicy Always, terminationGracePeriodSeconds 30 (a
// negative value becomes 1, as the API defaults do), dnsPolicy ClusterFirst, schedulerName default-scheduler, enableServiceLinks
// true, a non-nil securityContext; defaultMode 0644 on secret, configMap,
// downwardAPI and projected volumes.
//
// Per container, init containers included: imagePullPolicy (Always when the
// image has no digest and its tag is "latest" or absent, IfNotPresent
// otherwise), terminationMessagePath /dev/termination-log,
// terminationMessagePolicy File, port protocol TCP (and hostPort equal to
// containerPort on a host-network pod), resource requests copied from limits
// when a request is unset, probe timeoutSeconds 1, periodSeconds 10,
// successThreshold 1, failureThreshold 3, HTTP probe scheme HTTP, and
// apiVersion v1 on env fieldRefs.
//
// What it does not do: the API server's admission plugins (service account,
// default tolerations, limit ranges) and defaults the agent does not read.
func SetDefaults(pod *v1.Pod) {
	spec := &pod.Spec
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := DefaultTerminationGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &g
	} else if *spec.TerminationGracePeriodSeconds < 0 {
		g := int64(1)
		spec.TerminationGracePeriodSeconds = &g
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = DefaultSchedulerName
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.EnableServiceLinks == nil {
		t := true
		spec.EnableServiceLinks = &t
	}
	for i := range spec.InitContainers {
		setContainerDefaults(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		setContainerDefaults(&spec.Containers[i], spec.HostNetwork)
	}
	for i := range spec.Volumes {
		setVolumeDefaults(&spec.Volumes[i])
	}
}

func setContainerDefaults(c *v1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = DefaultTerminationMessagePath
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	setResourceDefaults(&c.Resources)
	setProbeDefaults(c.LivenessProbe)
	setProbeDefaults(c.ReadinessProbe)
	setProbeDefaults(c.StartupProbe)
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
}

// defaultPullPolicy is the API server's rule: Always for an image without a
// digest whose tag is "latest" or absent, IfNotPresent otherwise.
func defaultPullPolicy(image string) v1.PullPolicy {
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	// The tag follows the last ':' after the last '/' (a ':' before it
	// belongs to a registry host:port).
	last := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(last, ":")
	if i < 0 || last[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// setResourceDefaults copies each limit into the matching request when the
// request is unset, as the API server does; the QoS class depends on it.
func setResourceDefaults(r *v1.ResourceRequirements) {
	if len(r.Limits) == 0 {
		return
	}
	if r.Requests == nil {
		r.Requests = v1.ResourceList{}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
}

func setProbeDefaults(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil && p.HTTPGet.Scheme == "" {
		p.HTTPGet.Scheme = v1.URISchemeHTTP
	}
}

func setVolumeDefaults(v *v1.Volume) {
	mode := func(m **int32) {
		if *m == nil {
			d := DefaultVolumeMode
			*m = &d
		}
	}
	switch {
	case v.Secret != nil:
		mode(&v.Secret.DefaultMode)
	case v.ConfigMap != nil:
		mode(&v.ConfigMap.DefaultMode)
	case v.DownwardAPI != nil:
		mode(&v.DownwardAPI.DefaultMode)
		for i := range v.DownwardAPI.Items {
			if fr := v.DownwardAPI.Items[i].FieldRef; fr != nil && fr.APIVersion == "" {
				fr.APIVersion = "v1"
			}
		}
	case v.Projected != nil:
		mode(&v.Projected.DefaultMode)
	}
}

// StaticPodDefaults prepares a pod read from a static source (a manifest
// file or a URL), the kubelet's applyDefaults: call it once per decoded pod,
// before Validate.
//
// source is where the pod came from: the manifest file's path, or the URL
// (anything of the form scheme://host...). It applies SetDefaults, then:
//
//   - when the pod has no UID, sets it to a hash of the node, the source and
//     the defaulted pod: the first 16 bytes, in hex, of the SHA-256 of
//     "host:<nodeName>", then "file:<path>" or "url:<url>", then the pod's JSON
//     encoding. The same manifest from the same source on the same node always
//     gets the same UID; any change to it gets a new one. (The kubelet hashes
//     with MD5 and leaves the node out for URLs; the UID has the same shape.)
//   - appends "-<nodeName in lower case>" to the name, so that static pods
//     of different nodes do not collide;
//   - sets the namespace to "default" when empty, spec.nodeName to nodeName,
//     the kubernetes.io/config.hash annotation to the UID, a toleration of
//     every NoExecute taint (static pods are not evicted), and status.phase
//     to Pending.
func StaticPodDefaults(pod *v1.Pod, source, nodeName string) {
	SetDefaults(pod)
	if pod.UID == "" {
		pod.UID = staticPodUID(pod, source, nodeName)
	}
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationHash] = string(pod.UID)
	addNoExecuteToleration(pod)
	pod.Status.Phase = v1.PodPending
}

func staticPodUID(pod *v1.Pod, source, nodeName string) types.UID {
	h := sha256.New()
	h.Write([]byte("host:" + nodeName))
	if isURL(source) {
		h.Write([]byte("url:" + source))
	} else {
		h.Write([]byte("file:" + source))
	}
	// encoding/json writes struct fields in declaration order and map keys
	// sorted, so the encoding is deterministic. A v1.Pod always encodes.
	b, _ := json.Marshal(pod)
	h.Write(b)
	return types.UID(hex.EncodeToString(h.Sum(nil)[:16]))
}

func isURL(source string) bool {
	u, err := url.Parse(source)
	return err == nil && u.Scheme != "" && u.Host != ""
}

// addNoExecuteToleration makes the pod tolerate every NoExecute taint,
// replacing a toleration with the same key, operator and effect.
func addNoExecuteToleration(pod *v1.Pod) {
	want := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	for i, t := range pod.Spec.Tolerations {
		if t.Key == "" && t.Operator == want.Operator && t.Effect == want.Effect {
			pod.Spec.Tolerations[i] = want
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, want)
}
