package kubeletconfig

import (
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// Flags are the kubelet's command-line flags an agent reads. Those that
// are also fields of the configuration (--max-pods, --cluster-dns, ...)
// override the file's when given, as the kubelet's do.
type Flags struct {
	// Config is --config, the KubeletConfiguration file.
	Config string
	// Kubeconfig is --kubeconfig: the agent's credentials, written by
	// the TLS bootstrap when BootstrapKubeconfig is set.
	Kubeconfig string
	// BootstrapKubeconfig is --bootstrap-kubeconfig.
	BootstrapKubeconfig string
	// CertDir is --cert-dir. Defaults to <RootDir>/pki.
	CertDir string
	// RootDir is --root-dir.
	RootDir string
	// NodeIP is --node-ip: the Node's InternalIP.
	NodeIP string
	// HostnameOverride is --hostname-override: the node's name.
	HostnameOverride string
	// NodeLabels is --node-labels.
	NodeLabels map[string]string
	// Verbosity is --v.
	Verbosity int

	overrides []func(*Configuration)
}

// Register defines the flags on fs, with the kubelet's names and
// defaults (RootDir defaults to rootDir).
func (f *Flags) Register(fs *flag.FlagSet, rootDir string) {
	fs.StringVar(&f.Config, "config", "", "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); flags override its fields")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of the node's credentials; written by the TLS bootstrap with --bootstrap-kubeconfig")
	fs.StringVar(&f.BootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig used to request the node's client certificate when --kubeconfig holds none")
	fs.StringVar(&f.CertDir, "cert-dir", "", "directory of the node's certificates (default <root-dir>/pki)")
	fs.StringVar(&f.RootDir, "root-dir", rootDir, "the agent's directory: pod directories and volumes")
	fs.StringVar(&f.NodeIP, "node-ip", "", "the Node's InternalIP (default: the host's first global IPv4 address)")
	fs.StringVar(&f.HostnameOverride, "hostname-override", "", "the node's name (default: the host name, lower-cased)")
	fs.Func("node-labels", "labels for the Node, key=value[,key=value...]", func(s string) error {
		l, err := parseLabels(s)
		if err != nil {
			return err
		}
		if f.NodeLabels == nil {
			f.NodeLabels = map[string]string{}
		}
		for k, v := range l {
			f.NodeLabels[k] = v
		}
		return nil
	})
	fs.IntVar(&f.Verbosity, "v", 0, "log verbosity (0: state changes, 1: pod lifecycle, 4: every sync)")

	// Flags that are fields of the configuration.
	str := func(name, usage string, set func(*Configuration, string)) {
		fs.Func(name, usage, func(s string) error {
			f.overrides = append(f.overrides, func(c *Configuration) { set(c, s) })
			return nil
		})
	}
	str("container-runtime-endpoint", "CRI endpoint (containerRuntimeEndpoint)", func(c *Configuration, s string) { c.ContainerRuntimeEndpoint = s })
	str("pod-manifest-path", "directory or file of static pods (staticPodPath)", func(c *Configuration, s string) { c.StaticPodPath = s })
	str("manifest-url", "URL of static pods (staticPodURL)", func(c *Configuration, s string) { c.StaticPodURL = s })
	str("cluster-domain", "cluster domain (clusterDomain)", func(c *Configuration, s string) { c.ClusterDomain = s })
	str("client-ca-file", "CA of the node API's client certificates (authentication.x509.clientCAFile)", func(c *Configuration, s string) { c.Authentication.X509.ClientCAFile = s })
	str("tls-cert-file", "node API serving certificate (tlsCertFile)", func(c *Configuration, s string) { c.TLSCertFile = s })
	str("tls-private-key-file", "node API serving key (tlsPrivateKeyFile)", func(c *Configuration, s string) { c.TLSPrivateKeyFile = s })
	str("address", "node API address (address)", func(c *Configuration, s string) { c.Address = s })
	str("resolv-conf", "resolver file of the pods (resolvConf)", func(c *Configuration, s string) { c.ResolverConfig = ptr.To(s) })
	str("pod-logs-dir", "directory of the containers' logs (podLogsDir)", func(c *Configuration, s string) { c.PodLogsDir = s })
	fs.Func("cluster-dns", "cluster DNS servers, comma-separated (clusterDNS)", func(s string) error {
		var ips []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if net.ParseIP(p) == nil {
				return fmt.Errorf("%q is not an IP address", p)
			}
			ips = append(ips, p)
		}
		f.overrides = append(f.overrides, func(c *Configuration) { c.ClusterDNS = ips })
		return nil
	})
	integer := func(name, usage string, set func(*Configuration, int64)) {
		fs.Func(name, usage, func(s string) error {
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				return err
			}
			f.overrides = append(f.overrides, func(c *Configuration) { set(c, n) })
			return nil
		})
	}
	integer("max-pods", "pods capacity (maxPods)", func(c *Configuration, n int64) { c.MaxPods = int32(n) })
	integer("port", "node API port (port)", func(c *Configuration, n int64) { c.Port = int32(n) })
	integer("pod-max-pids", "pids limit of each pod (podPidsLimit)", func(c *Configuration, n int64) { c.PodPidsLimit = ptr.To(n) })
	boolean := func(name, usage string, set func(*Configuration, bool)) {
		fs.Func(name, usage, func(s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return err
			}
			f.overrides = append(f.overrides, func(c *Configuration) { set(c, b) })
			return nil
		})
	}
	boolean("rotate-certificates", "rotate the client certificate (rotateCertificates)", func(c *Configuration, b bool) { c.RotateCertificates = b })
	boolean("rotate-server-certificates", "request the serving certificate from the cluster (serverTLSBootstrap)", func(c *Configuration, b bool) { c.ServerTLSBootstrap = b })
	boolean("anonymous-auth", "let requests without credentials in (authentication.anonymous.enabled)", func(c *Configuration, b bool) { c.Authentication.Anonymous.Enabled = ptr.To(b) })
	fs.Func("sync-frequency", "resync period of each pod (syncFrequency)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.overrides = append(f.overrides, func(c *Configuration) { c.SyncFrequency = metav1.Duration{Duration: d} })
		return nil
	})
	fs.Func("register-with-taints", "taints of the Node at registration, key=value:Effect[,...] (registerWithTaints)", func(s string) error {
		ts, err := parseTaints(s)
		if err != nil {
			return err
		}
		f.overrides = append(f.overrides, func(c *Configuration) { c.RegisterWithTaints = ts })
		return nil
	})
	keyed := func(name, usage string, set func(*Configuration, map[string]string)) {
		fs.Func(name, usage, func(s string) error {
			m, err := parsePairs(s, ",", "=")
			if err != nil {
				return err
			}
			f.overrides = append(f.overrides, func(c *Configuration) { set(c, m) })
			return nil
		})
	}
	keyed("system-reserved", "resources held back for the system, name=quantity[,...] (systemReserved)", func(c *Configuration, m map[string]string) { c.SystemReserved = m })
	keyed("kube-reserved", "resources held back for the agent, name=quantity[,...] (kubeReserved)", func(c *Configuration, m map[string]string) { c.KubeReserved = m })
	fs.Func("eviction-hard", "hard eviction thresholds, signal<value[,...] (evictionHard)", func(s string) error {
		m, err := parsePairs(s, ",", "<")
		if err != nil {
			return err
		}
		f.overrides = append(f.overrides, func(c *Configuration) { c.EvictionHard = m })
		return nil
	})
}

// parseLabels reads key=value[,key=value...], checking each key and value
// as the API server would.
func parseLabels(s string) (map[string]string, error) {
	m, err := parsePairs(s, ",", "=")
	if err != nil {
		return nil, err
	}
	for k, v := range m {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %s value %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	return m, nil
}

// parseTaints reads key[=value]:Effect[,...].
func parseTaints(s string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		kv, effect, ok := strings.Cut(p, ":")
		if !ok {
			return nil, fmt.Errorf("taint %q: no effect (key=value:Effect)", p)
		}
		k, v, _ := strings.Cut(kv, "=")
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("taint key %q: %s", k, strings.Join(errs, "; "))
		}
		switch e := v1.TaintEffect(effect); e {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			out = append(out, v1.Taint{Key: k, Value: v, Effect: e})
		default:
			return nil, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", p, effect)
		}
	}
	return out, nil
}

func parsePairs(s, sep, kv string) (map[string]string, error) {
	m := map[string]string{}
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, v, ok := strings.Cut(p, kv)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key%svalue", p, kv)
		}
		m[k] = v
	}
	return m, nil
}
