// Package imagestore keeps OCI images unpacked on disk for the process
// runtime (package process, Options.Images): a node without a registry or
// containerd runs containers chrooted into images it was given as files.
//
// # Usage
//
//	store, err := imagestore.New(imagestore.Options{Dir: "/var/lib/nodekit/images"})
//	// Put OCI layouts (directories) or "docker save" tarballs (*.tar)
//	// in store.ImportDir(); the agent's pulls import them.
//	rt, err := process.New(process.Options{Images: store})
//
// Pull finds the image whose reference (normalized: "busybox" is
// "docker.io/library/busybox:latest") names it, in the annotation
// org.opencontainers.image.ref.name of an OCI layout's index or the
// RepoTags of a tarball, verifies each layer's digest, and unpacks the
// flattened file system (go-containerregistry's mutate.Extract: layers
// merged, whiteouts and opaque directories applied) under
// <Dir>/images/<ID>/rootfs, once per image ID (the config digest, as
// containerd's). References are kept in <Dir>/refs.json; an image goes
// with its last reference.
//
// go-containerregistry does the OCI work (layout and tarball reading,
// layer decompression, flattening). It adds about 0.8 MB to a stripped
// binary that imports this package, and four modules
// (go-containerregistry, klauspost/compress, opencontainers/go-digest and
// image-spec); the process runtime takes a process.ImageStore interface,
// so a program that runs host commands only does not link it.
//
// # Concurrency
//
// A Store is safe for concurrent use and holds no goroutine; pulls are
// serialized. Two Stores must not share a Dir.
//
// # Errors
//
// An image no source holds, and Get of an image not pulled, match
// ErrNotFound (and runtime.ErrNotFound). A layer whose content does not
// match its digest, or that does not unpack, fails Pull with the layer's
// digest or file; nothing is left unpacked.
package imagestore
