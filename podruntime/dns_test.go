package podruntime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func dnsManager(t *testing.T, dns DNSOptions, resolv string) *Manager {
	t.Helper()
	dns.ResolvConf = filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(dns.ResolvConf, []byte(resolv), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFakes(t, Options{DNS: dns})
	return f.m
}

const hostResolv = `# host
nameserver 192.168.0.1
nameserver 192.168.0.2 ; second
search old.example
search corp.example. lab.example .
options ndots:1 edns0
`

func TestPodDNSConfig(t *testing.T) {
	cluster := DNSOptions{ClusterDNS: []string{"10.0.0.10"}, ClusterDomain: "cluster.local"}
	long := strings.Repeat("a", 254)
	many := make([]string, 40)
	for i := range many {
		many[i] = fmt.Sprintf("d%02d", i) + strings.Repeat("x", 60)
	}
	for _, tc := range []struct {
		name     string
		dns      DNSOptions
		policy   v1.DNSPolicy
		hostNet  bool
		config   *v1.PodDNSConfig
		want     *runtimeapi.DNSConfig
		warnings []string
	}{{
		name: "ClusterFirst with cluster DNS", dns: cluster,
		want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"},
			Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"},
			Options:  []string{"ndots:5"}},
	}, {
		name: "ClusterFirst on the host network: the host's", dns: cluster, hostNet: true,
		want: &runtimeapi.DNSConfig{Servers: []string{"192.168.0.1", "192.168.0.2"}, Searches: []string{"corp.example", "lab.example"}, Options: []string{"ndots:1", "edns0"}},
	}, {
		name: "ClusterFirstWithHostNet", dns: cluster, hostNet: true, policy: v1.DNSClusterFirstWithHostNet,
		want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"},
			Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"},
			Options:  []string{"ndots:5"}},
	}, {
		name: "Default", dns: cluster, policy: v1.DNSDefault,
		want: &runtimeapi.DNSConfig{Servers: []string{"192.168.0.1", "192.168.0.2"}, Searches: []string{"corp.example", "lab.example"}, Options: []string{"ndots:1", "edns0"}},
	}, {
		name: "None with the pod's config", dns: cluster, policy: v1.DNSNone,
		config: &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"my.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}, {Name: "rotate"}}},
		want:   &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"my.example"}, Options: []string{"ndots:2", "rotate"}},
	}, {
		name: "the pod's config merged: options overridden by name", dns: cluster,
		config: &v1.PodDNSConfig{Nameservers: []string{"10.0.0.10", "1.1.1.1"}, Searches: []string{"cluster.local", "x.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr("1")}}},
		want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10", "1.1.1.1"},
			Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example", "x.example"},
			Options:  []string{"ndots:1"}},
	}, {
		name: "ClusterFirst on a cluster node without cluster DNS: the host's, with a warning", dns: DNSOptions{ClusterDomain: "cluster.local"},
		want:     &runtimeapi.DNSConfig{Servers: []string{"192.168.0.1", "192.168.0.2"}, Searches: []string{"corp.example", "lab.example"}, Options: []string{"ndots:1", "edns0"}},
		warnings: []string{"MissingClusterDNS"},
	}, {
		name: "a standalone agent: the host's, silently",
		want: &runtimeapi.DNSConfig{Servers: []string{"192.168.0.1", "192.168.0.2"}, Searches: []string{"corp.example", "lab.example"}, Options: []string{"ndots:1", "edns0"}},
	}, {
		name: "limits: 3 nameservers, no search over 253 characters", dns: cluster, policy: v1.DNSNone,
		config:   &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"}, Searches: []string{long, "ok.example"}},
		want:     &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}, Searches: []string{"ok.example"}, Options: []string{}},
		warnings: []string{"DNSConfigForming", "DNSConfigForming"},
	}, {
		name: "limits: 32 searches, 2048 characters", dns: cluster, policy: v1.DNSNone,
		config:   &v1.PodDNSConfig{Searches: many},
		want:     &runtimeapi.DNSConfig{Searches: many[:32], Options: []string{}},
		warnings: []string{"DNSConfigForming"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := dnsManager(t, tc.dns, hostResolv)
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
				Spec: v1.PodSpec{DNSPolicy: tc.policy, HostNetwork: tc.hostNet, DNSConfig: tc.config}}
			got, warnings := m.podDNSConfig(pod)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b *runtimeapi.DNSConfig) bool {
				return cmp.Equal(a.Servers, b.Servers, cmpEmpty) && cmp.Equal(a.Searches, b.Searches, cmpEmpty) && cmp.Equal(a.Options, b.Options, cmpEmpty)
			})); diff != "" {
				t.Errorf("dns (-want +got):\n%s\ngot %v", diff, got)
			}
			var reasons []string
			for _, w := range warnings {
				reasons = append(reasons, w[0])
			}
			if !cmp.Equal(tc.warnings, reasons, cmpEmpty) {
				t.Errorf("warnings = %v, want %v", warnings, tc.warnings)
			}
		})
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
})

func TestManagedHosts(t *testing.T) {
	got := string(managedHosts([]string{"10.1.0.5", "fd00::5"}, "web-0", "web.ns.svc.cluster.local",
		[]v1.HostAlias{{IP: "10.9.9.9", Hostnames: []string{"foo.local", "bar.local"}}}))
	want := "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n" +
		"10.1.0.5\tweb-0.web.ns.svc.cluster.local\tweb-0\n" +
		"fd00::5\tweb-0.web.ns.svc.cluster.local\tweb-0\n" +
		"\n# Entries added by HostAliases.\n" +
		"10.9.9.9\tfoo.local\tbar.local\n"
	if got != want {
		t.Errorf("hosts:\n%s\nwant:\n%s", got, want)
	}
	if got := string(managedHosts([]string{"10.1.0.5"}, "p", "", nil)); !strings.HasSuffix(got, "fe00::2\tip6-allrouters\n10.1.0.5\tp\n") {
		t.Errorf("hosts without a domain or aliases:\n%s", got)
	}
}

// TestResolvConfCache checks that the host's resolver file, parsed once,
// is read again when it is edited in place or replaced, and that each
// caller gets its own copy.
func TestResolvConfCache(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	write := func(p, content string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(path, "nameserver 10.0.0.1\nsearch a.example\noptions ndots:2\n", t0)
	var c resolvConfCache
	get := func() *runtimeapi.DNSConfig {
		t.Helper()
		cfg, err := c.get(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	want := &runtimeapi.DNSConfig{Servers: []string{"10.0.0.1"}, Searches: []string{"a.example"}, Options: []string{"ndots:2"}}
	first := get()
	if diff := cmp.Diff(want, first, protocmp.Transform()); diff != "" {
		t.Fatalf("first read (-want +got):\n%s", diff)
	}
	// A caller's changes stay its own.
	first.Servers = append(first.Servers[:1], "changed")
	first.Searches[0] = "changed"
	if diff := cmp.Diff(want, get(), protocmp.Transform()); diff != "" {
		t.Fatalf("after a caller changed its copy (-want +got):\n%s", diff)
	}

	// Edited in place, same size, new modification time.
	write(path, "nameserver 10.0.0.2\nsearch b.example\noptions ndots:3\n", t0.Add(time.Second))
	want = &runtimeapi.DNSConfig{Servers: []string{"10.0.0.2"}, Searches: []string{"b.example"}, Options: []string{"ndots:3"}}
	if diff := cmp.Diff(want, get(), protocmp.Transform()); diff != "" {
		t.Fatalf("after an edit (-want +got):\n%s", diff)
	}

	// Replaced by a rename, with the same size and modification time.
	tmp := filepath.Join(dir, "resolv.conf.new")
	write(tmp, "nameserver 10.0.0.3\nsearch c.example\noptions ndots:4\n", t0.Add(time.Second))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	want = &runtimeapi.DNSConfig{Servers: []string{"10.0.0.3"}, Searches: []string{"c.example"}, Options: []string{"ndots:4"}}
	if diff := cmp.Diff(want, get(), protocmp.Transform()); diff != "" {
		t.Fatalf("after a replacement (-want +got):\n%s", diff)
	}

	// Gone: an error, and the file is read again once it is back.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.get(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: got %v, want ErrNotExist", err)
	}
	write(path, "nameserver 10.0.0.4\n", t0)
	if diff := cmp.Diff(&runtimeapi.DNSConfig{Servers: []string{"10.0.0.4"}}, get(), protocmp.Transform()); diff != "" {
		t.Fatalf("after the file came back (-want +got):\n%s", diff)
	}
}

// TestResolvConfCacheConcurrent has sandboxes read the cached file while
// it changes (run with -race).
func TestResolvConfCacheConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 10.0.0.1\nsearch a.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c resolvConfCache
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				cfg, err := c.get(path)
				if err != nil {
					t.Error(err)
					return
				}
				if len(cfg.Servers) != 1 {
					t.Errorf("servers %v, want one", cfg.Servers)
					return
				}
				cfg.Servers = append(cfg.Servers, "10.9.9.9")
				cfg.Searches = append(cfg.Searches, "x.example")
			}
		})
	}
	// Each version replaces the file whole, as resolvers' tools do: a
	// reader never sees half a file.
	for i := range 50 {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("nameserver 10.0.0.%d\nsearch a.example\n", i%200+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// BenchmarkPodDNSConfig forms the DNS configuration of one sandbox, the
// host's resolver file being unchanged: a stat of the file, no parse.
func BenchmarkPodDNSConfig(b *testing.B) {
	dir := b.TempDir()
	dns := DNSOptions{ClusterDNS: []string{"10.0.0.10"}, ClusterDomain: "cluster.local", ResolvConf: filepath.Join(dir, "resolv.conf")}
	if err := os.WriteFile(dns.ResolvConf, []byte(hostResolv), 0o644); err != nil {
		b.Fatal(err)
	}
	m, err := New(critest.NewFakeRuntimeService(), critest.NewFakeImageService(), Options{DNS: dns})
	if err != nil {
		b.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	b.ReportAllocs()
	for b.Loop() {
		if cfg, _ := m.podDNSConfig(pod); len(cfg.Servers) != 1 {
			b.Fatalf("servers %v", cfg.Servers)
		}
	}
}

// TestHostnameOverride: a pod's spec.hostnameOverride is its hostname, in
// the sandbox and in its /etc/hosts, in place of its name, spec.hostname
// and spec.subdomain, with no domain (the hosts file has no FQDN), as the
// kubelet's GeneratePodHostNameAndDomain; one longer than 63 characters is
// cut as a long pod name is.
func TestHostnameOverride(t *testing.T) {
	f := newFakes(t, Options{RootDir: t.TempDir(), DNS: DNSOptions{ClusterDomain: "cluster.local"}})
	override := "override.example.host"
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{Hostname: "custom-host", Subdomain: "t", HostnameOverride: &override}}
	if got := f.m.sandboxHostname(pod); got != override {
		t.Errorf("sandbox hostname = %q, want %q", got, override)
	}
	mount, err := f.m.hostsMount(pod, &v1.Container{Name: "c"}, []string{"10.1.0.5"})
	if err != nil || mount == nil {
		t.Fatalf("hostsMount = %v, %v", mount, err)
	}
	hosts, err := os.ReadFile(mount.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(hosts), "fe00::2\tip6-allrouters\n10.1.0.5\toverride.example.host\n") {
		t.Errorf("hosts of a pod with hostnameOverride:\n%s", hosts)
	}

	long := strings.Repeat("a", 62) + ".-b.example"
	pod.Spec.HostnameOverride = &long
	if got, want := f.m.sandboxHostname(pod), strings.Repeat("a", 62); got != want {
		t.Errorf("sandbox hostname of a long override = %q, want %q", got, want)
	}
}
