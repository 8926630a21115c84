// Package objectvolume is the volume plugin that shows the keys of one
// API object of the pod's namespace as files: the configMap and secret
// plugins, which differ only in their Kind (the object, how its keys are
// read, the names in errors, whether the volume lives on a tmpfs).
//
// # Usage
//
// A plugin package describes its kind and returns the plugin:
//
//	type Plugin = objectvolume.Plugin[Getter]
//
//	func New(get Getter, opts Options) (*Plugin, error) {
//		return objectvolume.New(get, kind(), objectvolume.Options{Logger: opts.Logger})
//	}
//
// The type parameter, the kind's getter, keeps the plugins of two kinds
// apart as types.
//
// # Concurrency
//
// A Plugin is safe for concurrent use; the volume manager never calls it
// twice at once for the same pod.
//
// # Errors
//
// Errors start with Kind.Package and the volume: "configmap: volume cfg:
// ...". The content, the keeping of content while the API server is away,
// and the tmpfs are package projection's.
package objectvolume
