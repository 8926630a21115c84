// Package env resolves a container's environment variables as the
// kubelet does: plain values with $(VAR) references, envFrom ConfigMaps
// and Secrets with their prefixes, and valueFrom fieldRef (through
// podmodel's one downward-API resolver), resourceFieldRef (limits and
// requests with a divisor; the node's allocatable for a limit the
// container does not set), configMapKeyRef and secretKeyRef; and the
// service links of enableServiceLinks from the Services of the pod's
// namespace and the master Service (KUBERNETES_SERVICE_HOST, ...).
//
// The ConfigMaps and Secrets come from an objects.Getter, the same one the
// configMap and secret volumes read, so a standalone agent supplies them
// once for both.
//
// # Usage
//
//	r := env.New(env.Options{Objects: cache, NodeAllocatable: alloc, HostIPs: hostIPs, Recorder: rec})
//	vars, err := r.Container(ctx, pod, &pod.Spec.Containers[0], sandboxIPs)
//
// podruntime.Options.Env takes a Resolver; the runtime turns an error
// into the container's CreateContainerConfigError with the error's
// message.
//
// # Differences from the kubelet
//
//   - The variables come in a stable order (envFrom keys sorted within
//     each source, then env as declared; a redefined name keeps its first
//     place). The kubelet passes them in map order.
//   - The kubelet (v1.37, RelaxedEnvironmentVariableValidation) takes every
//     envFrom key: the API server's key rules make each one a valid name.
//     A Getter of a user's is not bound by those rules, so a key that no
//     variable can be named (empty, with '=' or a non-printable character)
//     is skipped, with an InvalidEnvironmentVariableNames Warning event on
//     the pod, as the kubelet did before that validation was relaxed.
//   - Service links (Options.Services) are the kubelet's variables, rules
//     and waits, in a stable order: after the container's own variables,
//     sorted by Service name. A pod whose enableServiceLinks is unset
//     gets them, as the API server's default (the kubelet refuses such a
//     pod, which its defaulting never leaves unset). Without Services (a
//     standalone agent) there are none, as with a kubelet without an API
//     server.
//   - fileKeyRef (EnvFiles, alpha) is refused with an error.
//   - The environment is bounded, where the kubelet sets no bound: each
//     value, after $(VAR) expansion, at 1 MiB and the whole (the sum of
//     its "NAME=value" strings) at 8 MiB, above what the kernel's execve
//     takes (128 KiB for one string, at most 6 MiB for all). The
//     expansion stops as soon as a bound is crossed, so a few variables
//     that refer to each other many times cannot make gigabytes.
//
// # Concurrency
//
// A Resolver is safe for concurrent use when its Getter, functions and
// Recorder are.
//
// # Errors
//
// The messages are the kubelet's: "couldn't find key k in ConfigMap
// ns/name", "couldn't find key k in Secret ns/name", the getter's own
// error for a missing object (`configmaps "name" not found`), and
// podmodel's for an invalid field ("invalid key subscript in ...").
// Without a Getter, a ConfigMap or Secret reference that is not optional
// fails with an error matching ErrNoObjects. A value or an environment past
// its bound fails with an error that names the variable ("env V2: too long:
// more than 1048576 bytes after $(VAR) expansion", "env V9: too long: the
// environment would exceed 8388608 bytes") and matches ErrTooLong.
package env
