// Package integration tests nodekit's parts against a real kube-apiserver
// and etcd. It has no code of its own, only tests.
//
// The tests read the kubeconfig from NODEKIT_KUBECONFIG (never KUBECONFIG,
// so they cannot touch a real cluster) and skip when it is unset:
//
//	hack/apiserver.sh start
//	eval "$(hack/apiserver.sh env)"
//	go test ./test/integration/
//	hack/apiserver.sh stop
//
// TestAPIServerOutage starts an API server of its own with the same script
// (the binaries must be built: a running API server implies they are),
// stops it for 30 s and starts it again; -short skips it. TestOfflineRestart
// does the same around an agent's restart, to check the API source's
// checkpoint.
//
// TestJoinAsNode starts an API server of its own with the Node authorizer,
// NodeRestriction and bootstrap tokens, kube-controller-manager (built by
// hack/controller-manager.sh, cached) and cmd/nodekit-agent on containerd
// (NODEKIT_CRI_ENDPOINT, as root); it takes about five minutes, waiting for
// a client certificate to expire, and -short skips it.
//
// Every test uses node and pod names of its own, so the tests can share one
// API server and run again against it.
package integration
