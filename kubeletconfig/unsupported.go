package kubeletconfig

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// fieldNames are the top-level fields of kubelet.config.k8s.io/v1beta1's
// KubeletConfiguration (k8s.io/kubelet v0.37.2), kind and apiVersion
// aside; a test checks them against the type.
var fieldNames = strings.Fields(`enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency
httpCheckFrequency staticPodURL staticPodURLHeader address port readOnlyPort tlsCertFile tlsPrivateKeyFile
tlsCipherSuites tlsCurvePreferences tlsMinVersion rotateCertificates serverTLSBootstrap authentication
authorization registryPullQPS registryBurst imagePullCredentialsVerificationPolicy
preloadedImagesVerificationAllowlist eventRecordQPS eventBurst enableDebuggingHandlers
enableContentionProfiling healthzPort healthzBindAddress oomScoreAdj clusterDomain clusterDNS
streamingConnectionIdleTimeout nodeStatusUpdateFrequency nodeStatusReportFrequency nodeLeaseDurationSeconds
imageMinimumGCAge imageMaximumGCAge imageGCHighThresholdPercent imageGCLowThresholdPercent
volumeStatsAggPeriod kubeletCgroups systemCgroups cgroupRoot cgroupsPerQOS cgroupDriver cpuManagerPolicy
singleProcessOOMKill cpuManagerPolicyOptions cpuManagerReconcilePeriod memoryManagerPolicy
topologyManagerPolicy topologyManagerScope topologyManagerPolicyOptions qosReserved runtimeRequestTimeout
hairpinMode maxPods podCIDR podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod
nodeStatusMaxImages maxOpenFiles contentType kubeAPIQPS kubeAPIBurst serializeImagePulls
maxParallelImagePulls evictionHard evictionSoft evictionSoftGracePeriod evictionPressureTransitionPeriod
evictionMaxPodGracePeriod evictionMinimumReclaim mergeDefaultEvictionSettings podsPerCore
enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains iptablesMasqueradeBit
iptablesDropBit featureGates failSwapOn memorySwap containerLogMaxSize containerLogMaxFiles
containerLogMaxWorkers containerLogMonitorInterval configMapAndSecretChangeDetectionStrategy systemReserved
kubeReserved reservedSystemCPUs showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup
enforceNodeAllocatable allowedUnsafeSysctls defaultPodSysctls volumePluginDir providerID
kernelMemcgNotification logging enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod
shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory
enableProfilingHandler enableDebugFlagsHandler seccompDefault memoryThrottlingFactor memoryReservationPolicy
registerWithTaints registerNode tracing localStorageCapacityIsolation containerRuntimeEndpoint
imageServiceEndpoint failCgroupV1 userNamespaces`)

// supported marks the fields (dotted paths) nodekit acts on, whatever
// their value; Settings checks their values.
var supported = setOf(`enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency
httpCheckFrequency staticPodURL staticPodURLHeader address port tlsCertFile tlsPrivateKeyFile
rotateCertificates serverTLSBootstrap authentication.x509.clientCAFile authentication.anonymous.enabled
clusterDomain clusterDNS nodeStatusUpdateFrequency nodeStatusReportFrequency nodeLeaseDurationSeconds
imageMinimumGCAge imageMaximumGCAge imageGCHighThresholdPercent imageGCLowThresholdPercent maxPods
podPidsLimit resolvConf cpuCFSQuota cpuCFSQuotaPeriod contentType kubeAPIQPS kubeAPIBurst
serializeImagePulls maxParallelImagePulls evictionHard evictionSoft evictionSoftGracePeriod
evictionPressureTransitionPeriod evictionMaxPodGracePeriod evictionMinimumReclaim
mergeDefaultEvictionSettings containerLogMaxSize containerLogMaxFiles containerLogMonitorInterval
systemReserved kubeReserved enforceNodeAllocatable allowedUnsafeSysctls registerWithTaints
localStorageCapacityIsolation containerRuntimeEndpoint crashLoopBackOff.maxContainerRestartPeriod
userNamespaces.idsPerPod logging.verbosity cgroupRoot`)

// byDefault are fields nodekit does not configure but behaves as the
// kubelet does at the value given (its default): set to it they are not
// reported. A time.Duration compares with a duration string.
var byDefault = map[string]any{
	"authentication.webhook.enabled":             true,
	"authentication.webhook.cacheTTL":            2 * time.Minute,
	"authorization.mode":                         "Webhook",
	"authorization.webhook.cacheAuthorizedTTL":   5 * time.Minute,
	"authorization.webhook.cacheUnauthorizedTTL": 30 * time.Second,
	"registryPullQPS":                            5,
	"registryBurst":                              10,
	"eventRecordQPS":                             50,
	"eventBurst":                                 100,
	"enableDebuggingHandlers":                    true,
	"healthzPort":                                10248,
	"healthzBindAddress":                         "127.0.0.1",
	"oomScoreAdj":                                -999,
	"streamingConnectionIdleTimeout":             4 * time.Hour,
	"volumeStatsAggPeriod":                       time.Minute,
	"cgroupRoot":                                 "/",
	"cgroupsPerQOS":                              true,
	"cgroupDriver":                               "cgroupfs",
	"cpuManagerPolicy":                           "none",
	"cpuManagerReconcilePeriod":                  10 * time.Second,
	"memoryManagerPolicy":                        "None",
	"topologyManagerPolicy":                      "none",
	"topologyManagerScope":                       "container",
	"runtimeRequestTimeout":                      2 * time.Minute,
	"hairpinMode":                                "promiscuous-bridge",
	"nodeStatusMaxImages":                        50,
	"maxOpenFiles":                               1000000,
	"enableControllerAttachDetach":               true,
	"makeIPTablesUtilChains":                     true,
	"iptablesMasqueradeBit":                      14,
	"iptablesDropBit":                            15,
	"failSwapOn":                                 true,
	"containerLogMaxWorkers":                     1,
	"configMapAndSecretChangeDetectionStrategy":  "Watch",
	"volumePluginDir":                            "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
	"enableSystemLogHandler":                     true,
	"enableProfilingHandler":                     true,
	"enableDebugFlagsHandler":                    true,
	"failCgroupV1":                               true,
	"memoryReservationPolicy":                    "None",
	"registerNode":                               true,
	"imagePullCredentialsVerificationPolicy":     "NeverVerifyPreloadedImages",
	"logging.format":                             "text",
	"logging.flushFrequency":                     5 * time.Second,
	"memorySwap.swapBehavior":                    "NoSwap",
	"logging.options.text.infoBufferSize":        "0",
	"logging.options.json.infoBufferSize":        "0",
}

// keyed are the fields whose keys are names of their own, reported as
// field[key].
var keyed = setOf(`featureGates qosReserved cpuManagerPolicyOptions topologyManagerPolicyOptions defaultPodSysctls`)

func setOf(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(s) {
		m[f] = true
	}
	return m
}

// unsupported returns the fields of raw (a file as JSON values) that are
// set to something nodekit would not do, sorted: every field neither
// supported nor at its default, zero values (the kubelet's "unset")
// aside; and the fields v1beta1 does not have, marked "(unknown field)".
func unsupported(raw map[string]any) []string {
	known := map[string]bool{}
	for _, f := range fieldNames {
		known[f] = true
	}
	var out []string
	for k, v := range raw {
		if k == "kind" || k == "apiVersion" {
			continue
		}
		if !known[k] {
			out = append(out, k+" (unknown field)")
			continue
		}
		out = walk(out, k, v)
	}
	slices.Sort(out)
	return out
}

func walk(out []string, path string, v any) []string {
	if supported[path] || zero(v) {
		return out
	}
	if def, ok := byDefault[path]; ok && equal(v, def) {
		return out
	}
	m, isMap := v.(map[string]any)
	switch {
	case isMap && keyed[path]:
		for k, e := range m {
			if !zero(e) {
				out = append(out, fmt.Sprintf("%s[%s]", path, k))
			}
		}
	case isMap:
		for k, e := range m {
			out = walk(out, path+"."+k, e)
		}
	default:
		out = append(out, path)
	}
	return out
}

// zero reports whether v is a zero JSON value: what the kubelet's
// defaulting takes for unset.
func zero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == "" || v == "0" || v == "0s"
	case json.Number:
		f, err := v.Float64()
		return err == nil && f == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		for _, e := range v {
			if !zero(e) {
				return false
			}
		}
		return true
	}
	return false
}

// equal compares a JSON value with a default.
func equal(v, def any) bool {
	switch def := def.(type) {
	case time.Duration:
		switch v := v.(type) {
		case string:
			d, err := time.ParseDuration(v)
			return err == nil && d == def
		case json.Number:
			n, err := v.Int64()
			return err == nil && time.Duration(n) == def
		}
	case int:
		n, ok := v.(json.Number)
		i, err := n.Int64()
		return ok && err == nil && i == int64(def)
	case string:
		return v == def
	case bool:
		return v == def
	}
	return false
}

// FieldNames returns the fields of KubeletConfiguration, kind and
// apiVersion aside, sorted.
func FieldNames() []string { return slices.Sorted(slices.Values(fieldNames)) }
