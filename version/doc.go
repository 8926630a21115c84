// Package version tells which nodekit a program was built with, from the
// module's build information (runtime/debug.ReadBuildInfo): nodekit's
// module version when nodekit is a dependency of the program, the main
// module's when the program is built in nodekit's own repository, and
// "(devel)" with the VCS revision, when the build recorded one, otherwise.
// It also tells the Kubernetes version nodekit follows: v1.N.P for the
// k8s.io/api v0.N.P the program was built with.
//
// # Usage
//
//	if *showVersion {
//		fmt.Println(version.Get()) // nodekit v0.1.0 (kubernetes v1.37.2, go1.26.8)
//		return
//	}
//
// # What the Node shows
//
// A Node's status.nodeInfo.kubeletVersion tells the version skew between
// the control plane and the node: kubectl shows it, and controllers,
// upgrade and policy tools parse it as a semantic version and compare its
// major, minor and patch. So that field keeps the Kubernetes version
// nodekit follows and carries nodekit's version as semantic-version build
// metadata, which comparisons ignore: v1.37.2+nodekit.v0.1.0
// (Info.KubeletVersion), as other distributions of the kubelet do
// (v1.37.2+k3s1). The Node's annotation nodekit.io/version holds nodekit's
// version as it is (Info.Module).
//
// # Concurrency
//
// Get reads the build information of the running binary and may be called
// from any goroutine; an Info is a value.
package version
