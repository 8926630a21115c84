// Package status keeps the API status of every pod the agent runs: the
// v1.PodStatus the agent would report, versioned, with the kubelet's merge
// rules (a terminal phase is final, the start time is kept), and tells an
// observer of each change.
//
// # Concurrency
//
// Manager is safe for concurrent use. The observer is called without the
// manager's lock held, in the order of the changes of each pod.
package status
