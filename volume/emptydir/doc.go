// Package emptydir is the emptyDir volume plugin: a directory that starts
// empty when the pod starts, is shared by the pod's containers, and is
// deleted when the pod is gone.
//
// # Usage
//
//	vm, err := volume.NewManager("/var/lib/nodekit", volume.Options{
//		Plugins: []volume.Plugin{emptydir.New(emptydir.Options{})},
//	})
//
// The volume manager gives the plugin each volume's directory,
// <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>. SetUp creates it
// with mode 0777 (the kubelet's), owned by the pod's fsGroup (setgid) when
// it has one. Medium Memory mounts a tmpfs there, of the size MemorySize
// computes: the smaller of the volume's sizeLimit and the pod's memory
// limit; writes beyond it fail with ENOSPC. The tmpfs root keeps the mode
// tmpfs gives it, 1777 (sticky), as the kubelet's: with an fsGroup it is
// dgtrwxrwxrwx, and a missing subPath of it is created with that mode. The tmpfs is mounted with
// mount(2), so the agent needs CAP_SYS_ADMIN for Memory volumes. TearDown
// unmounts the tmpfs and deletes the directory.
//
// Differences from the kubelet: medium HugePages is refused (ErrInvalid);
// a sizeLimit on disk is not enforced (the kubelet evicts the pod when it
// is exceeded; nodekit has no eviction yet); without sizeLimit or pod
// memory limits the tmpfs has the kernel's default size (half the RAM)
// rather than the node's allocatable memory; the tmpfs has no noswap
// option.
package emptydir
