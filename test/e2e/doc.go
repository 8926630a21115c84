// Package e2e holds nodekit's end-to-end tests: an Agent with the CRI
// client (runtime/cri) runs real pods in a real containerd, started by
// hack/containerd.sh. The package has no API; its tests are the point.
//
// # Usage
//
// As root on Linux, hack/test.sh starts Debian's containerd 1.6 and a
// containerd 2.x (built from the Go module proxy, cached), exports their
// endpoints and runs every test of the module:
//
//	hack/test.sh -v -run . ./test/e2e/
//
// By hand:
//
//	eval "$(hack/containerd.sh start >/dev/null; hack/containerd.sh start --version 2 >/dev/null; hack/containerd.sh env)"
//	go test -race -v ./test/e2e/
//
// NODEKIT_CRI_ENDPOINT names the containerd 1.6 endpoint and
// NODEKIT_CRI2_ENDPOINT the 2.x one (for the evented PLEG); a test whose
// endpoint is unset or whose socket is absent skips and says why, unless
// NODEKIT_E2E_REQUIRED=1 (set by hack/test.sh), which makes it fail
// instead. The tests that stop containerd start a throw-away instance of
// their own with hack/containerd.sh (NODEKIT_CONTAINERD_SH, or the
// repository's copy).
//
// # Concurrency
//
// An agent owns its runtime: its housekeeping stops every pod it does not
// know. The tests therefore run one after the other, never in parallel, and
// nothing else should create kubelet-labelled pods on the same containerd
// while they run. Each test uses its own node name and namespace, its own
// agent root directory (a temporary directory) and its own node cgroup root
// (nodekit-e2e-XXXXXX, never the agent's default kubepods), removes what it
// created through CRI and then that cgroup root even when it fails, and
// checks that nothing of its own is left.
//
// TestSoak churns static pods and API pods on a containerd and an API
// server of its own (kube-apiserver and etcd started by hack/apiserver.sh
// in a directory of the test's own: the shared API server of the other
// tests is never killed), with the agent's root directory on a 32Mi tmpfs.
// It restarts the agent, kills containerd (also while a RunPodSandbox is in
// flight), kills the API server (and every other round restarts the agent
// while it is down) and fills the disk, checks invariants after each fault
// and logs its figures (faults injected by kind, pods churned, violations).
// It needs NODEKIT_KUBECONFIG (the shared API server's binaries) and skips
// without it. Its short form (2 rounds, 4 static and 4 API pods, about 3
// minutes) runs with the others; for a long run by hand:
//
//	NODEKIT_SOAK_DURATION=15m NODEKIT_SOAK_PODS=8 hack/test.sh -v -timeout 1h -run TestSoak ./test/e2e/
//
// NODEKIT_SOAK_ROUNDS sets the number of rounds instead of a duration.
// NODEKIT_SOAK_SEED repeats a run's random choices (the seed is logged).
// TestHostPathSwapRace races a symlink swap against containerd's mount of
// hostPath volumes 1000 times.
//
// The cgroup test reads cgroup v1 limits and skips on a host without the
// v1 memory and cpu controllers.
package e2e
