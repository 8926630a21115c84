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
// # The node's logins
//
// After the pod's Secrets come the logins of a Provider (the runtime
// manager's NodeCredentials): a Keyring of the caller's, NodeFiles and
// Plugins, chained with Providers.
//
// NodeFiles is the kubelet's node docker config: the first config.json
// of its root directory, the working directory, $HOME/.docker and
// /.docker, else the first .dockercfg of the root directory, the working
// directory, $HOME and /. Its logins are node-wide.
//
// Plugins runs the kubelet's credential-provider plugins
// (CredentialProviderConfig, kubelet.config.k8s.io/v1; the
// credentialprovider.kubelet.k8s.io/v1 protocol, v1beta1 and v1alpha1
// too): the config's validation rules, a plugin per provider whose
// matchImages match the image's repository, run at most once at a time
// per image (and token) with the config's args and env after the
// agent's, within a minute; its response's logins cached per image,
// registry or globally for its cacheDuration (0: not cached; unset: the
// provider's defaultCacheDuration), expired entries purged every 15
// minutes. With tokenAttributes (service account token mode, on by
// default since 1.34), the plugin also gets a token of the pod's service
// account for the configured audience, bound to the pod, and the
// annotations asked for; a missing required annotation skips the plugin;
// a plugin returning the token as the password is refused unless the
// cache type is Token; its logins belong to that service account (the
// image pull records let its pods use an image pulled with them). A
// plugin that fails is logged and gives no logins, as the kubelet's.
//
// # Differences from the kubelet
//
// NodeFiles reads the files at each lookup (a pull, or the access check
// of an image pulled with a login): the kubelet caches what it read for 5
// minutes; nodekit's lookups are rare and reading sees a new login at the
// next pull. Providers are tried in the order given (the agent's: the
// caller's keyring, the node files, then the plugins in config order),
// where the kubelet ranges over its registered providers; every login is
// tried until a pull succeeds, so the order decides only which of several
// working logins is recorded.
//
// # Concurrency
//
// A Keyring is safe for concurrent lookups once built; Add must not run
// concurrently with anything else.
package credentials
