// Package credentials turns a pod's imagePullSecrets into the registry
// credentials of an image pull, with the kubelet's docker-config rules
// (the kubelet v1.37's credential provider keyring and its pull-secret
// parsing, rewritten here: nodekit does not depend on the kubelet's
// code).
//
// # Usage
//
//	secrets, missing := credentials.PodSecrets(ctx, getter, pod)
//	kr, err := credentials.NewKeyring(secrets) // *ConfigError for a malformed one
//	for _, c := range kr.Lookup(pod.Spec.Containers[0].Image) {
//		ref, err := images.PullImage(ctx, spec, c.AuthConfig(), sandbox)
//		...
//	}
//
// # The rules
//
// A Secret of type kubernetes.io/dockerconfigjson with a non-empty
// .dockerconfigjson key (a {"auths": {...}} document), or of type
// kubernetes.io/dockercfg with a non-empty .dockercfg key (the legacy map
// of registries), gives the credentials of its entries; other Secrets
// are ignored. An entry's auth field, base64 of "user:password" (padded
// or not), overrides its username and password. A Secret that does not
// parse makes NewKeyring fail, as the kubelet's keyring does: the pull
// is not attempted with the other Secrets alone.
//
// An entry's key is a registry URL: a scheme (http:// or https://) is
// dropped, as is a leading /v1/ or /v2/ of its path. It matches an image
// (normalized: busybox is docker.io/library/busybox) when the hosts have
// as many dot-separated parts and each part matches as a glob
// (*.example.com matches a.example.com, not a.b.example.com), the ports
// are equal (none equals none only), and the entry's path is a prefix of
// the image's path. Lookup returns every matching credential, the most
// specific key first (keys in reverse lexical order, so
// registry.example.com/team before registry.example.com), the Secrets'
// order within a key; when none matches, an image of Docker Hub gets the
// credentials of index.docker.io. The caller tries them in order until a
// pull succeeds, and pulls without credentials only when there are none.
//
// PodSecrets reads the Secrets the pod's spec names, in its order, and
// names those it cannot read (the caller records the kubelet's
// FailedToRetrieveImagePullSecret event and pulls without them). The
// service account's imagePullSecrets are not read here, as the kubelet
// does not read them: the API server's ServiceAccount admission plugin
// copies them into the pod's spec when the pod is created.
//
// # Differences from the kubelet
//
// The kubelet also reads node-wide docker configs (its root directory,
// ~/.docker/config.json) and credential-provider plugins; nodekit reads
// the pod's Secrets, and the node-wide keyring its caller builds with
// Keyring.Add (a nil source: runtime.ManagerOptions.NodeCredentials).
//
// # Concurrency
//
// A Keyring is safe for concurrent lookups once built; Add must not run
// concurrently with anything else.
package credentials
