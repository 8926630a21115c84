// Package volume prepares the volumes of a node's pods: the Plugin
// interface that sets up one kind of volume (hostpath and emptydir are the
// first), and the Manager, the kubelet's volume manager, which keeps the
// volumes of the pods that should run set up, tears down the others, owns
// the pods' directories under the agent's root, and turns a container's
// volumeMounts into host mounts for the runtime.
//
// Packages configmap, secret, downwardapi and projected are the plugins of
// API data (with service-account tokens), written atomically and kept up
// to date by calling SetUp again (their RequiresRefresh method).
//
// # Usage
//
//	hp, err := hostpath.New(hostpath.Options{AllowedHostPaths: allowed})
//	...
//	vm, err := volume.NewManager("/var/lib/nodekit", volume.Options{
//		Plugins: []volume.Plugin{hp, emptydir.New(emptydir.Options{})},
//		Logger:  log,
//	})
//	...
//	go vm.Run(ctx) // retries failed set-ups, tears down removed pods
//
//	// In the pod worker's SyncPod, before starting containers:
//	mounts, err := vm.WaitForPodVolumes(ctx, pod)
//	// For each container the runtime creates:
//	cms, err := vm.ContainerMounts(pod, &pod.Spec.Containers[i], mounts, env)
//	// In SyncTerminatedPod, once every container stopped:
//	err = vm.ReleasePod(ctx, pod.UID)
//	// In housekeeping, once every source is ready:
//	err = vm.CleanupOrphans(ctx, uidsOfEveryPodTheSourcesList)
//
// # Desired and actual state
//
// The desired state holds the pods given to AddPod or WaitForPodVolumes
// and not yet to RemovePod or ReleasePod; of each pod, only the volumes a
// container (init, app or ephemeral) mounts, as in the kubelet. The actual
// state holds the volumes set up, with the plugin that did it. Run
// reconciles a pod when it changes (AddPod, RemovePod) and when it is due:
// a volume that failed is retried after 500ms, doubling up to 2m2s, and
// refreshable volumes are set up again every RefreshPeriod; a pod that is
// no longer desired has its volumes torn down and its directory removed.
// Nothing else wakes Run but a pass over every pod each ReconcilePeriod
// (1m), a safety net: an idle node costs no CPU however many pods it has,
// where the kubelet's reconciler walks every pod every 100ms. WaitForPodVolumes and ReleasePod do
// the same at once for one pod, so the Manager also works without Run.
// Each of these reconciliations of a pod first plans, without I/O, from
// the desired pod, the actual state, the back-offs and the time, the steps
// to take (mount, unmount or refresh a volume, make or release the pod's
// directory), then carries them out with the plugins and records their
// outcome in the actual state.
//
// # Pod directories
//
// The layout is the kubelet's (see PodDirs):
// <root>/pods/<uid>/{volumes,plugins,containers}, created (mode 0750) when
// the pod is first set up, and <root>/pods/<uid>/volume-subpaths for subPath
// binds. A pod's directory is removed by ReleasePod, by Run once the pod is
// removed, or by CleanupOrphans when no pod of the sources has its UID
// (left by an earlier run of the agent). Before removing, the volumes found
// on disk are torn down by their plugin (a tmpfs emptyDir is unmounted), the
// subPath binds unmounted; then, if /proc/self/mountinfo still shows
// anything mounted under the directory, nothing is removed: removing
// through a mount would delete what it shows. ReleasePod returns that as an
// error; CleanupOrphans logs it once and keeps the directory.
//
// # Host safety
//
// Pod UIDs, volume and container names become directory names and are
// refused when they are not single path components (a static pod's
// manifest may set its UID). The hostpath plugin checks host paths against
// its allow-list, before and after following symlinks. ContainerMounts
// confines subPaths to their volume: absolute and ".." subPaths are
// refused, symlinks are followed and the result must stay in the volume,
// and the subPath is bind-mounted from a descriptor opened without
// following symlinks, so that a container cannot redirect it afterwards
// (see Options.NoSubPathBind).
//
// # Concurrency
//
// A Manager is safe for concurrent use. Operations on one pod (plugin
// calls, its directories) are serialized; different pods proceed in
// parallel. Run must be called at most once. Plugins are called
// concurrently for different pods.
//
// # Errors
//
// Errors start with "volume: " (or the plugin's package name). Those that
// retrying does not cure wrap ErrNoPlugin (no plugin for the volume's
// source: "volume: no volume plugin for volume config (configMap)"),
// ErrNotAllowed (refused by the agent's configuration) or ErrInvalid (a
// mistake in the pod spec); WaitForPodVolumes returns at once on them, and
// otherwise after WaitTimeout (2m3s), with a *WaitError:
//
//	volume: pod default/web: unmounted volumes=[data], error: data: hostpath: volume data: /etc/shadow is outside the allowed host paths [/srv]
//
// # Differences from the kubelet
//
// There is no attach/detach (no network volumes yet), no SELinux
// relabelling, no recursive read-only mounts, no volumeDevices, and no
// reconstruction of a running pod's volumes after a restart beyond what
// SetUp's idempotence gives (a tmpfs emptyDir found mounted is reused).
// Permanent errors end WaitForPodVolumes at once instead of after the
// timeout. Plugins are matched first-wins instead of failing when two
// match.
package volume
