package podruntime

import v1 "k8s.io/api/core/v1"

// withHostIPs returns the pod, or a shallow copy of it whose status has
// the node's addresses when its own has none: the status is written after
// the first containers start, but their environment's status.hostIP and
// status.hostIPs (HOST_IP) must already hold the node's address, as with
// the kubelet.
func withHostIPs(pod *v1.Pod, hostIPs func() []string) *v1.Pod {
	if hostIPs == nil || pod.Status.HostIP != "" || len(pod.Status.HostIPs) > 0 {
		return pod
	}
	ips := hostIPs()
	if len(ips) == 0 {
		return pod
	}
	p := *pod
	p.Status.HostIP = ips[0]
	p.Status.HostIPs = make([]v1.HostIP, len(ips))
	for i, ip := range ips {
		p.Status.HostIPs[i] = v1.HostIP{IP: ip}
	}
	return &p
}
