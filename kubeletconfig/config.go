package kubeletconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The kind and API version of a kubelet configuration file.
const (
	Kind       = "KubeletConfiguration"
	APIVersion = "kubelet.config.k8s.io/v1beta1"
)

// MaxFileBytes bounds the size of a configuration file: a kubelet's is a
// few KiB.
const MaxFileBytes = 1 << 20

// Configuration holds the fields of a KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) that nodekit acts on, with the same
// names and JSON form as k8s.io/kubelet/config/v1beta1's, whose package is
// not imported: it links k8s.io/component-base's feature gates and
// metrics registry, process-wide state nodekit keeps out of its
// packages. The other fields of a file are kept as read (File.Raw) and
// reported when nodekit would ignore them (File.Unsupported).
type Configuration struct {
	EnableServer                     *bool               `json:"enableServer,omitempty"`
	StaticPodPath                    string              `json:"staticPodPath,omitempty"`
	PodLogsDir                       string              `json:"podLogsDir,omitempty"`
	SyncFrequency                    metav1.Duration     `json:"syncFrequency,omitempty"`
	FileCheckFrequency               metav1.Duration     `json:"fileCheckFrequency,omitempty"`
	HTTPCheckFrequency               metav1.Duration     `json:"httpCheckFrequency,omitempty"`
	StaticPodURL                     string              `json:"staticPodURL,omitempty"`
	StaticPodURLHeader               map[string][]string `json:"staticPodURLHeader,omitempty"`
	Address                          string              `json:"address,omitempty"`
	Port                             int32               `json:"port,omitempty"`
	TLSCertFile                      string              `json:"tlsCertFile,omitempty"`
	TLSPrivateKeyFile                string              `json:"tlsPrivateKeyFile,omitempty"`
	RotateCertificates               bool                `json:"rotateCertificates,omitempty"`
	ServerTLSBootstrap               bool                `json:"serverTLSBootstrap,omitempty"`
	Authentication                   Authentication      `json:"authentication"`
	Authorization                    Authorization       `json:"authorization"`
	ClusterDomain                    string              `json:"clusterDomain,omitempty"`
	ClusterDNS                       []string            `json:"clusterDNS,omitempty"`
	NodeStatusUpdateFrequency        metav1.Duration     `json:"nodeStatusUpdateFrequency,omitempty"`
	NodeStatusReportFrequency        metav1.Duration     `json:"nodeStatusReportFrequency,omitempty"`
	NodeLeaseDurationSeconds         int32               `json:"nodeLeaseDurationSeconds,omitempty"`
	ImageMinimumGCAge                metav1.Duration     `json:"imageMinimumGCAge,omitempty"`
	ImageMaximumGCAge                metav1.Duration     `json:"imageMaximumGCAge,omitempty"`
	ImageGCHighThresholdPercent      *int32              `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent       *int32              `json:"imageGCLowThresholdPercent,omitempty"`
	MaxPods                          int32               `json:"maxPods,omitempty"`
	PodPidsLimit                     *int64              `json:"podPidsLimit,omitempty"`
	ResolverConfig                   *string             `json:"resolvConf,omitempty"`
	CgroupRoot                       string              `json:"cgroupRoot,omitempty"`
	CPUCFSQuota                      *bool               `json:"cpuCFSQuota,omitempty"`
	CPUCFSQuotaPeriod                *metav1.Duration    `json:"cpuCFSQuotaPeriod,omitempty"`
	ContentType                      string              `json:"contentType,omitempty"`
	KubeAPIQPS                       *int32              `json:"kubeAPIQPS,omitempty"`
	KubeAPIBurst                     int32               `json:"kubeAPIBurst,omitempty"`
	SerializeImagePulls              *bool               `json:"serializeImagePulls,omitempty"`
	MaxParallelImagePulls            *int32              `json:"maxParallelImagePulls,omitempty"`
	EvictionHard                     map[string]string   `json:"evictionHard,omitempty"`
	EvictionSoft                     map[string]string   `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod          map[string]string   `json:"evictionSoftGracePeriod,omitempty"`
	EvictionPressureTransitionPeriod metav1.Duration     `json:"evictionPressureTransitionPeriod,omitempty"`
	EvictionMaxPodGracePeriod        int32               `json:"evictionMaxPodGracePeriod,omitempty"`
	EvictionMinimumReclaim           map[string]string   `json:"evictionMinimumReclaim,omitempty"`
	MergeDefaultEvictionSettings     *bool               `json:"mergeDefaultEvictionSettings,omitempty"`
	ContainerLogMaxSize              string              `json:"containerLogMaxSize,omitempty"`
	ContainerLogMaxFiles             *int32              `json:"containerLogMaxFiles,omitempty"`
	ContainerLogMonitorInterval      *metav1.Duration    `json:"containerLogMonitorInterval,omitempty"`
	SystemReserved                   map[string]string   `json:"systemReserved,omitempty"`
	KubeReserved                     map[string]string   `json:"kubeReserved,omitempty"`
	EnforceNodeAllocatable           []string            `json:"enforceNodeAllocatable,omitempty"`
	AllowedUnsafeSysctls             []string            `json:"allowedUnsafeSysctls,omitempty"`
	RegisterWithTaints               []v1.Taint          `json:"registerWithTaints,omitempty"`
	LocalStorageCapacityIsolation    *bool               `json:"localStorageCapacityIsolation,omitempty"`
	ContainerRuntimeEndpoint         string              `json:"containerRuntimeEndpoint"`
	CrashLoopBackOff                 CrashLoopBackOff    `json:"crashLoopBackOff,omitempty"`
	UserNamespaces                   *UserNamespaces     `json:"userNamespaces,omitempty"`
	Logging                          Logging             `json:"logging,omitempty"`
}

// Authentication is the node API's authentication (the kubelet's
// authentication field).
type Authentication struct {
	X509      X509Authentication      `json:"x509"`
	Webhook   WebhookAuthentication   `json:"webhook"`
	Anonymous AnonymousAuthentication `json:"anonymous"`
}

// X509Authentication names the CA of client certificates.
type X509Authentication struct {
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// WebhookAuthentication authenticates bearer tokens by TokenReview.
type WebhookAuthentication struct {
	Enabled  *bool           `json:"enabled,omitempty"`
	CacheTTL metav1.Duration `json:"cacheTTL,omitempty"`
}

// AnonymousAuthentication lets requests without credentials in.
type AnonymousAuthentication struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// Authorization is the node API's authorization (the kubelet's
// authorization field).
type Authorization struct {
	Mode    string               `json:"mode,omitempty"`
	Webhook WebhookAuthorization `json:"webhook"`
}

// WebhookAuthorization authorizes requests by SubjectAccessReview.
type WebhookAuthorization struct {
	CacheAuthorizedTTL   metav1.Duration `json:"cacheAuthorizedTTL,omitempty"`
	CacheUnauthorizedTTL metav1.Duration `json:"cacheUnauthorizedTTL,omitempty"`
}

// CrashLoopBackOff bounds the containers' restart back-off.
type CrashLoopBackOff struct {
	MaxContainerRestartPeriod *metav1.Duration `json:"maxContainerRestartPeriod,omitempty"`
}

// UserNamespaces configures the pods' user namespaces.
type UserNamespaces struct {
	IDsPerPod *int64 `json:"idsPerPod,omitempty"`
}

// Logging is the part of the kubelet's logging nodekit reads: its
// verbosity.
type Logging struct {
	Verbosity int32 `json:"verbosity,omitempty"`
}

// File is a configuration file as read: its fields nodekit acts on, and
// all of them as written.
type File struct {
	// Config holds the fields nodekit acts on, not defaulted.
	Config Configuration
	// Raw is the whole file as JSON values, kind and apiVersion included.
	Raw map[string]any
}

// ReadFile reads a KubeletConfiguration file (YAML or JSON) of at most
// MaxFileBytes.
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kubeletconfig: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("kubeletconfig: %w", err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("kubeletconfig: %s is larger than %d bytes", path, MaxFileBytes)
	}
	file, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("kubeletconfig: %s: %w", path, err)
	}
	return file, nil
}

// Parse reads a KubeletConfiguration from YAML or JSON. A type error is
// returned with the field's path (e.g. "maxPods: ...").
func Parse(data []byte) (*File, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, errors.New("empty configuration")
	}
	if k, _ := raw["kind"].(string); k != Kind {
		return nil, fmt.Errorf("kind: %q, want %q", raw["kind"], Kind)
	}
	if v, _ := raw["apiVersion"].(string); v != APIVersion {
		return nil, fmt.Errorf("apiVersion: %q, want %q", raw["apiVersion"], APIVersion)
	}
	var c Configuration
	if err := json.Unmarshal(js, &c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%s: a %s cannot hold the %s given", te.Field, te.Type, te.Value)
		}
		return nil, err
	}
	return &File{Config: c, Raw: raw}, nil
}

// SetDefaults applies the kubelet's v1beta1 defaults (its
// SetDefaults_KubeletConfiguration, with the default feature gates) to
// the fields of c.
func SetDefaults(c *Configuration) {
	durations := []struct {
		d   *metav1.Duration
		def string
	}{
		{&c.SyncFrequency, "1m"}, {&c.FileCheckFrequency, "20s"}, {&c.HTTPCheckFrequency, "20s"},
		{&c.Authentication.Webhook.CacheTTL, "2m"},
		{&c.Authorization.Webhook.CacheAuthorizedTTL, "5m"}, {&c.Authorization.Webhook.CacheUnauthorizedTTL, "30s"},
		{&c.ImageMinimumGCAge, "2m"}, {&c.EvictionPressureTransitionPeriod, "5m"},
	}
	for _, d := range durations {
		if d.d.Duration == 0 {
			d.d.Duration = mustDuration(d.def)
		}
	}
	if c.EnableServer == nil {
		c.EnableServer = ptr.To(true)
	}
	if c.Address == "" {
		c.Address = "0.0.0.0"
	}
	if c.Port == 0 {
		c.Port = 10250
	}
	if c.Authentication.Anonymous.Enabled == nil {
		c.Authentication.Anonymous.Enabled = ptr.To(false)
	}
	if c.Authentication.Webhook.Enabled == nil {
		c.Authentication.Webhook.Enabled = ptr.To(true)
	}
	if c.Authorization.Mode == "" {
		c.Authorization.Mode = "Webhook"
	}
	if c.NodeStatusReportFrequency.Duration == 0 {
		// As the kubelet: an explicit update frequency is also the report
		// frequency, for compatibility.
		if c.NodeStatusUpdateFrequency.Duration == 0 {
			c.NodeStatusReportFrequency.Duration = mustDuration("5m")
		} else {
			c.NodeStatusReportFrequency = c.NodeStatusUpdateFrequency
		}
	}
	if c.NodeStatusUpdateFrequency.Duration == 0 {
		c.NodeStatusUpdateFrequency.Duration = mustDuration("10s")
	}
	if c.NodeLeaseDurationSeconds == 0 {
		c.NodeLeaseDurationSeconds = 40
	}
	if c.ImageGCHighThresholdPercent == nil {
		c.ImageGCHighThresholdPercent = ptr.To[int32](85)
	}
	if c.ImageGCLowThresholdPercent == nil {
		c.ImageGCLowThresholdPercent = ptr.To[int32](80)
	}
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.PodPidsLimit == nil || *c.PodPidsLimit < 0 {
		c.PodPidsLimit = ptr.To[int64](-1)
	}
	if c.ResolverConfig == nil {
		c.ResolverConfig = ptr.To("/etc/resolv.conf")
	}
	if c.CPUCFSQuota == nil {
		c.CPUCFSQuota = ptr.To(true)
	}
	if c.CPUCFSQuotaPeriod == nil {
		c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: mustDuration("100ms")}
	}
	if c.ContentType == "" {
		c.ContentType = "application/vnd.kubernetes.protobuf"
	}
	if c.KubeAPIQPS == nil {
		c.KubeAPIQPS = ptr.To[int32](50)
	}
	if c.KubeAPIBurst == 0 {
		c.KubeAPIBurst = 100
	}
	if c.SerializeImagePulls == nil {
		c.SerializeImagePulls = ptr.To(c.MaxParallelImagePulls == nil || *c.MaxParallelImagePulls < 2)
	}
	if c.MergeDefaultEvictionSettings == nil {
		c.MergeDefaultEvictionSettings = ptr.To(false)
	}
	if c.ContainerLogMaxSize == "" {
		c.ContainerLogMaxSize = "10Mi"
	}
	if c.ContainerLogMaxFiles == nil {
		c.ContainerLogMaxFiles = ptr.To[int32](5)
	}
	if c.ContainerLogMonitorInterval == nil {
		c.ContainerLogMonitorInterval = &metav1.Duration{Duration: mustDuration("10s")}
	}
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{"pods"}
	}
	if c.LocalStorageCapacityIsolation == nil {
		c.LocalStorageCapacityIsolation = ptr.To(true)
	}
	if c.ContainerRuntimeEndpoint == "" {
		c.ContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = "/var/log/pods"
	}
	// KubeletCrashLoopBackOffMax is on by default.
	if c.CrashLoopBackOff.MaxContainerRestartPeriod == nil {
		c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: mustDuration("300s")}
	}
}
