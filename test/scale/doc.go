// Package scale measures nodekit's hollow nodes against KWOK's simulated
// nodes on one real kube-apiserver. It has no code of its own, only a
// benchmark, BenchmarkHollowVsKWOK, which for each shape (N nodes × P pods
// a node) starts a fresh kube-apiserver and etcd (hack/apiserver.sh) with
// an audit log of writes, then runs each simulator in a process of its own
// so that its CPU and resident set are its own: first kwok (hack/kwok.sh,
// v0.8.0, managing the Nodes the benchmark creates with the annotation
// kwok.x-k8s.io/node=fake, with kwokctl's default stages and Leases of
// 40 s, renewed every 10 s like the kubelet's and the hollow nodes'), then the
// hollow-nodes example (package hollow). For each it reports the time to N
// Ready Nodes, the idle CPU and resident set per node, then, for P pods a
// node created with spec.nodeName set (no scheduler), the CPU per pod start
// and the time until all run, the API writes per pod start and the resident
// set with the pods, and what each node adds to the resident set beyond
// the first (over a run of the same simulator with one node). Both sides
// are reported by the same run, with their ratio, so that benchstat shows
// them side by side.
//
//	hack/apiserver.sh build && hack/kwok.sh build
//	eval "$(hack/apiserver.sh env)" # only to say the binaries are there
//	go test -run '^$' -bench 'HollowVsKWOK/nodes=50/' -benchtime 1x -timeout 60m ./test/scale/
//
// NODEKIT_SCALE_SHAPES replaces the shapes (50x20,200x10,1000x1),
// e.g. NODEKIT_SCALE_SHAPES=5x2; NODEKIT_SCALE_WINDOW the idle window (30s);
// NODEKIT_SCALE_KWOK_LEASE kwok's Lease duration (40; kwokctl's is 200).
// The table of each shape, both sides and their ratio, is printed on
// standard output.
package scale
