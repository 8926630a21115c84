package podruntime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DNSOptions are the node's DNS settings, the kubelet's clusterDNS,
// clusterDomain and resolvConf.
type DNSOptions struct {
	// ClusterDNS are the cluster DNS servers that ClusterFirst pods use.
	// Defaults to none: such pods fall back to the host's settings (with a
	// MissingClusterDNS event), as with the kubelet.
	ClusterDNS []string
	// ClusterDomain, e.g. "cluster.local", adds the cluster's search
	// domains to ClusterFirst pods and names pods with a subdomain.
	// Defaults to none.
	ClusterDomain string
	// ResolvConf is the host's resolver file that Default pods (and
	// ClusterFirst pods without ClusterDNS) take their servers, searches
	// and options from. Defaults to /etc/resolv.conf.
	ResolvConf string
}

// The kubelet's DNS limits (the API's validation limits) and events.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchLength    = 253

	// EventMissingClusterDNS (Warning): a ClusterFirst pod on a node without
	// ClusterDNS; it gets the host's DNS settings.
	EventMissingClusterDNS = "MissingClusterDNS"
	// EventDNSConfigForming (Warning): the pod's DNS settings were cut to
	// the resolver's limits.
	EventDNSConfigForming = "DNSConfigForming"
)

// podDNSConfig is the sandbox's DNS configuration as the kubelet's
// GetPodDNS forms it, with the Warning events (reason, message) it gives
// rise to.
func (m *Manager) podDNSConfig(pod *v1.Pod) (*runtimeapi.DNSConfig, [][2]string) {
	var warnings [][2]string
	host, err := m.resolv.get(m.opts.DNS.ResolvConf)
	if err != nil {
		m.log.Error(err, "Cannot read the host's resolver configuration", "path", m.opts.DNS.ResolvConf)
		host = &runtimeapi.DNSConfig{}
	}
	cfg := host
	hostNetwork := isHostNetwork(pod)
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	cluster := policy == v1.DNSClusterFirstWithHostNet || (policy == v1.DNSClusterFirst && !hostNetwork)
	switch {
	case policy == v1.DNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case cluster && len(m.opts.DNS.ClusterDNS) > 0:
		cfg = &runtimeapi.DNSConfig{
			Servers:  slices.Clone(m.opts.DNS.ClusterDNS),
			Searches: m.clusterSearches(host.Searches, pod),
			Options:  []string{"ndots:5"},
		}
	case cluster && m.opts.DNS.ClusterDomain != "":
		// A node set up for a cluster (a cluster domain) but without its
		// DNS servers. A standalone agent, with neither, gets the host's
		// settings without the kubelet's warning at every pod.
		msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.", v1.DNSClusterFirst, v1.DNSDefault)
		warnings = append(warnings, [2]string{EventMissingClusterDNS, fmt.Sprintf("pod: %q. %s", podFullName(pod), msg)})
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		warnings = append(warnings, [2]string{EventDNSConfigForming, "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(cfg.Servers, " ")})
	}
	var cut bool
	cfg.Searches, cut = fitSearches(cfg.Searches)
	if cut {
		warnings = append(warnings, [2]string{EventDNSConfigForming, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(cfg.Searches, " ")})
	}
	return cfg, warnings
}

// clusterSearches puts the cluster's domains before the host's searches.
func (m *Manager) clusterSearches(hostSearches []string, pod *v1.Pod) []string {
	d := m.opts.DNS.ClusterDomain
	if d == "" {
		return hostSearches
	}
	return omitDuplicates(append([]string{pod.Namespace + ".svc." + d, "svc." + d, d}, hostSearches...))
}

// fitSearches applies the kubelet's search-line limits: 32 paths, none
// over 253 characters, 2048 characters in all (cut from the end).
func fitSearches(s []string) ([]string, bool) {
	cut := false
	if len(s) > maxDNSSearchPaths {
		s, cut = s[:maxDNSSearchPaths], true
	}
	kept := s[:0:0]
	for _, d := range s {
		if len(d) > maxDNSSearchLength {
			cut = true
			continue
		}
		kept = append(kept, d)
	}
	for len(kept) > 0 && len(strings.Join(kept, " ")) > maxDNSSearchListChars {
		kept, cut = kept[:len(kept)-1], true
	}
	return kept, cut
}

func omitDuplicates(s []string) []string {
	seen := map[string]bool{}
	out := s[:0:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// mergeDNSOptions overrides options by name ("ndots:5"); the pod's come
// last. The kubelet's order is a map's; nodekit keeps the first
// appearance of each name.
func mergeDNSOptions(existing []string, pod []v1.PodDNSConfigOption) []string {
	var names []string
	vals := map[string]string{}
	set := func(n, v string) {
		if _, ok := vals[n]; !ok {
			names = append(names, n)
		}
		vals[n] = v
	}
	for _, o := range existing {
		n, v, _ := strings.Cut(o, ":")
		set(n, v)
	}
	for _, o := range pod {
		v := ""
		if o.Value != nil {
			v = *o.Value
		}
		set(o.Name, v)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if v := vals[n]; v != "" {
			out = append(out, n+":"+v)
		} else {
			out = append(out, n)
		}
	}
	return out
}

// resolvConfCache holds the host's resolver file as last parsed, so that
// a burst of sandboxes parses it once: each sandbox costs a stat of the
// file, and the file is read again when its size or modification time
// changed or another file took its place (a rename). The kubelet reads
// and parses it for every sandbox. The zero value is ready to use; it is
// safe for concurrent use.
type resolvConfCache struct {
	mu   sync.Mutex
	path string
	fi   os.FileInfo           // of the version parsed
	cfg  *runtimeapi.DNSConfig // never modified once cached
}

// get returns the parsed file at path: a copy the caller may change.
func (c *resolvConfCache) get(path string) (*runtimeapi.DNSConfig, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg == nil || c.path != path || !os.SameFile(c.fi, fi) || c.fi.Size() != fi.Size() || !c.fi.ModTime().Equal(fi.ModTime()) {
		cfg, err := parseResolvConf(path)
		if err != nil {
			return nil, err
		}
		c.path, c.fi, c.cfg = path, fi, cfg
	}
	return &runtimeapi.DNSConfig{
		Servers:  slices.Clone(c.cfg.Servers),
		Searches: slices.Clone(c.cfg.Searches),
		Options:  slices.Clone(c.cfg.Options),
	}, nil
}

// parseResolvConf reads nameserver, search and options lines as the
// kubelet does: the last search line wins, "." and trailing dots dropped.
func parseResolvConf(path string) (*runtimeapi.DNSConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.DNSConfig{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				cfg.Servers = append(cfg.Servers, f[1])
			}
		case "search":
			cfg.Searches = nil
			for _, s := range f[1:] {
				if s != "." {
					cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			cfg.Options = mergeDNSOptions(cfg.Options, optionsOf(f[1:]))
		}
	}
	return cfg, sc.Err()
}

func optionsOf(s []string) []v1.PodDNSConfigOption {
	out := make([]v1.PodDNSConfigOption, len(s))
	for i, o := range s {
		n, v, ok := strings.Cut(o, ":")
		out[i].Name = n
		if ok {
			out[i].Value = &v
		}
	}
	return out
}

// podDomain is the pod's domain, <subdomain>.<namespace>.svc.<cluster
// domain>, when it has a subdomain and no spec.hostnameOverride (a pod
// with one has no domain, as the kubelet's).
func (m *Manager) podDomain(pod *v1.Pod) string {
	if pod.Spec.Subdomain == "" || pod.Spec.HostnameOverride != nil {
		return ""
	}
	return pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + m.opts.DNS.ClusterDomain
}

// sandboxHostname is the sandbox's hostname: the pod's, or its FQDN with
// setHostnameAsFQDN; "" on the host network.
func (m *Manager) sandboxHostname(pod *v1.Pod) string {
	if isHostNetwork(pod) {
		return ""
	}
	h := podHostname(pod)
	if d := m.podDomain(pod); d != "" && pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN {
		return h + "." + d
	}
	return h
}

// hostsMount writes the pod's managed /etc/hosts, <RootDir>/pods/<uid>/
// etc-hosts, as the kubelet writes it, and returns its mount; nil when the
// Manager has no RootDir, the pod has no IP yet (and is not on the host
// network), or the container mounts /etc/hosts itself.
func (m *Manager) hostsMount(pod *v1.Pod, c *v1.Container, podIPs []string) (*runtimeapi.Mount, error) {
	if m.opts.RootDir == "" || strings.ContainsAny(string(pod.UID), `/\`) || string(pod.UID) == "" {
		return nil, nil
	}
	hostNetwork := isHostNetwork(pod)
	if len(podIPs) == 0 && !hostNetwork {
		return nil, nil
	}
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == "/etc/hosts" {
			return nil, nil
		}
	}
	var content []byte
	if hostNetwork {
		node, err := os.ReadFile(m.opts.HostsFile)
		if err != nil {
			return nil, fmt.Errorf("reading the node's hosts file: %w", err)
		}
		content = append([]byte("# Kubernetes-managed hosts file (host network).\n"), node...)
		content = append(content, hostAliasEntries(pod.Spec.HostAliases)...)
	} else {
		content = managedHosts(podIPs, podHostname(pod), m.podDomain(pod), pod.Spec.HostAliases)
	}
	// The pod's directory exists once a container has its termination-log
	// file: it is made only when the write finds it missing.
	dir := filepath.Join(m.opts.RootDir, "pods", string(pod.UID))
	path := filepath.Join(dir, "etc-hosts")
	err := m.onDisk(func() error {
		err := writeFile(path, content, 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			if err = mkdirs(dir, 0o750); err == nil {
				err = writeFile(path, content, 0o644)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{HostPath: path, ContainerPath: "/etc/hosts"}, nil
}

// managedHosts is the kubelet's managedHostsFileContent.
func managedHosts(ips []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range ips {
		if net.ParseIP(ip) == nil {
			continue
		}
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

func hostAliasEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}
