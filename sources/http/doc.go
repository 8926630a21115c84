// Package http is the static pod source that polls a URL for pods, the
// kubelet's HTTP source (--manifest-url). The package shares its name with
// net/http, which its code imports as nethttp.
//
// The body is a Pod or a PodList, YAML or JSON; the kind field decides (a
// missing kind means Pod). A body of several YAML documents gives the pods
// of its first (empty documents aside), as the kubelet reads it; unlike the
// kubelet, which ignores them silently, each later document is logged as
// ignored (the first ten one by one, the others as a count). Every pod gets sources.StaticPodDefaults with the
// URL as its source and must pass sources.ValidateStatic (the API server's
// checks, which the kubelet also runs on static pods).
//
// # Usage
//
//	src, err := http.New(http.Options{
//		URL:      "https://config.example/pods/node-1",
//		Header:   nethttp.Header{"Authorization": {"Bearer " + token}},
//		NodeName: node,
//		Logger:   log,
//	})
//	if err != nil { ... }
//	cfg.Add(sources.HTTPSource, src)
//
// Given to an agent (nodekit.Options.Sources), the Source takes the
// agent's node name (sources.NodeNamer): leave NodeName empty; without a
// Logger of its own, it logs through the agent's (sources.LoggerSetter).
//
// # Errors
//
// No failure loses a pod: a request that fails or times out, a status other
// than 200, a body larger than MaxBodyBytes, a body that does not decode, or
// a single Pod that fails validation is logged with the URL and the reason,
// and the previous snapshot stands. The first three consecutive failures
// are logged as errors, later ones at V(4) until a poll succeeds or the
// failure's reason changes: a new reason is logged as an error again (its
// first three times). Two cases
// do change the pods: an empty 200 body sends an empty snapshot (and is
// logged), as the kubelet does, and pods of a PodList that fail validation
// are dropped one by one (each logged with its name) while the rest are sent.
//
// # Concurrency
//
// Run polls from its own goroutine and starts no other; it must not be
// called concurrently with itself. The pods sent are not modified
// afterwards.
package http
