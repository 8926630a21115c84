// Package sources holds pod sources and their merge, the kubelet's pod
// config.
//
// A Source delivers the pods it wants on the node as full snapshots. Config
// runs several named sources and merges their snapshots into one stream of
// incremental PodUpdates for the sync loop: REMOVE for pods a source no
// longer lists, ADD for new pods, UPDATE for a changed spec, labels,
// annotations, owner references or deletion grace, DELETE when a pod gets
// its deletionTimestamp, and RECONCILE when only its status changed. The
// subpackages file and http are the kubelet's static pod sources;
// sourcestest holds a conformance suite for custom sources.
//
// The package also holds what every source needs: SetDefaults (the API
// server's defaults the agent relies on), Validate (the checks the agent
// relies on), ValidateStatic (the API server's checks for pods that never
// went through it, as the kubelet runs the API server's own validation on
// static pods; that code is in k8s.io/kubernetes, so ValidateStatic
// rebuilds what apimachinery's helpers allow: the file and http sources
// apply it, so that a pod whose every sandbox would fail, such as one with
// a 165-character hostname, is refused with an error naming the file and
// the field) and StaticPodDefaults (UID, name and annotations of a
// static pod, the kubelet's applyDefaults).
//
// # Usage
//
//	cfg := sources.NewConfig(sources.ConfigOptions{Logger: log})
//	fileSrc, err := file.New(file.Options{Path: "/etc/kubernetes/manifests", NodeName: node})
//	...
//	if err := cfg.Add(sources.FileSource, fileSrc); err != nil { ... }
//	go cfg.Run(ctx)
//	for {
//		select {
//		case u := <-cfg.Updates():
//			// dispatch u.Op; u.Pods are read-only
//		case <-ctx.Done():
//			return
//		}
//	}
//
// # Merge semantics
//
// The merge keeps, per source, the pods of its last snapshot by UID. Within
// one snapshot, pods that fail Validate, and pods whose namespace/name or UID
// an earlier pod already took, are dropped and logged with the source and
// the pod. A new pod gets the annotations kubernetes.io/config.source (the
// source's name) and kubernetes.io/config.seen (the time it was first seen,
// RFC 3339 with nanoseconds); later versions keep the first-seen time.
// ADDs are sorted by creation time, then name, since the kubelet admits the
// oldest pods first. Unlike the kubelet, a change to a pod whose
// deletionTimestamp was already set is an UPDATE, not another DELETE.
//
// # Concurrency
//
// Config is safe for concurrent use. Run starts two goroutines per source
// (the source and its receiver) and returns after all of them exited. The
// pods in PodUpdates are shared with the merge's state and later updates,
// and parts of them with each other (the pods one snapshot adds without
// annotations of their own share one map of the merge's annotations, and
// the pods whose spec.securityContext is empty share one): treat them as
// read-only.
//
// # Errors
//
// Bad pods never stop the merge; they are dropped and logged. A source
// whose Run returns an error is logged and the other sources go on; it
// stays unready if it never delivered a snapshot.
package sources
