// Package projected is the projected volume plugin: ConfigMap and Secret
// keys, downward API values and service-account tokens together in one
// directory, kept up to date when their sources change and refreshed
// before the tokens expire.
//
// # Usage
//
//	pp, err := projected.NewForClient(client, projected.Options{
//		NodeAllocatable: func() v1.ResourceList { return allocatable },
//		Logger:          log,
//	})
//	...
//	vm, err := volume.NewManager(rootDir, volume.Options{
//		Plugins: []volume.Plugin{pp, ...},
//	})
//
// New takes a Getter instead of a client (Funcs makes one of functions):
// a cache, or a fake in tests.
//
// # Sources
//
// Each source adds its files, a later source winning a path two share:
//
//   - configMap and secret: their keys or items, as in packages configmap
//     and secret (optional objects and keys alike);
//   - downwardAPI: its items, as in package downwardapi;
//   - serviceAccountToken: a token for the pod's service account
//     (spec.serviceAccountName, "default" when empty), bound to the pod,
//     for the audience (the API server's own when empty) and lifetime
//     (expirationSeconds, default 1h) asked, at its path, requested
//     through TokenRequest. The file has the volume's defaultMode, or 0600
//     owned by the pods' user when every container runs as the same uid,
//     or 0640 with the pod's fsGroup, as the kubelet.
//
// clusterTrustBundle and podCertificate sources are not supported
// (volume.ErrInvalid). Files have the item's mode, else defaultMode, else
// 0644. The volume's directory,
// <root>/pods/<uid>/volumes/kubernetes.io~projected/<name>, is a tmpfs of
// its own as in the kubelet (a plain directory, logged once, when the
// agent cannot mount or Options.NoTmpfs is set), mounted read-only.
//
// # Tokens
//
// The plugin caches each token, as the kubelet's token manager, and
// requests a new one at a SetUp once 80% of its lifetime has passed (or it
// is 24h old), less a random jitter of up to 10s. When that request fails
// and the cached token has not expired, the cached one is kept and the
// failure logged. Tokens are forgotten when their pod's volume is torn
// down, and when they expire.
//
// # Updates
//
// SetUp is idempotent and writes through the atomic writer (see package
// configmap): a container sees the old files or the new ones, never a mix,
// and nothing is written when nothing changed. The plugin implements
// RequiresRefresh(vol) bool: a volume manager that calls SetUp again for
// such plugins' volumes (the kubelet does on every pod sync, at least
// every minute) keeps the files up to date and the tokens fresh.
//
// # Errors
//
// Errors start with "projected: volume <name>: " and name the source
// ("sources[1]: getting secret default/creds: ..."); the errors of all
// sources are joined. A spec the plugin cannot serve is
// volume.ErrInvalid. When a source fails for a reason that may pass (the
// API server unreachable) and the volume already has content, SetUp keeps
// that content and succeeds, logging the error; the kubelet fails instead.
package projected
