// Package pleg holds pod lifecycle event generators (PLEGs) and the pod
// status cache they keep.
//
// A PLEG watches the container runtime and tells the sync loop which pods
// changed: ContainerStarted, ContainerDied, ContainerRemoved and
// ContainerChanged events. Generic relists the runtime every second and diffs
// each container's state against the previous relist, the kubelet's generic
// PLEG. Alongside the events it keeps a Cache of each pod's runtime status,
// which the pod workers read with "newer than" semantics.
//
// # Usage
//
//	cache := pleg.NewCache()
//	g, err := pleg.NewGeneric(rt, manager, cache, pleg.GenericOptions{})
//	...
//	go g.Run(ctx) // relists now, then every RelistPeriod
//	for ev := range g.Events() { ... sync pod ev.ID ... }
//	...
//	status, err := cache.GetNewerThan(ctx, uid, lastSyncTime)
//
// Generic needs only a Lister (ListPodSandbox and ListContainers, which any
// runtime.RuntimeService has) and a StatusGetter (podruntime.Manager, or a
// StatusGetterFunc in tests).
//
// On each relist Generic lists every sandbox and container, groups them
// into pods by the runtime.LabelPodUID label, and compares each one's
// state (running, exited, unknown, non-existent; a sandbox counts as a
// container, running while ready) with the previous relist, with the
// kubelet's table: ContainerStarted, ContainerDied, ContainerRemoved
// (preceded by ContainerDied if the death was not seen), ContainerChanged.
// Every pod with events is inspected (StatusGetter) and its status stored
// in the Cache with the time of the inspection, or deleted from it when the
// pod is gone; then the Cache's time is set to the relist's start, which
// wakes pod workers waiting for a newer status. ContainerChanged events
// are not sent, as in the kubelet. A relist costs a constant number of
// allocations when nothing changed: records are kept across relists and
// swept with a generation counter.
//
// When the Lister is also a runtime.WireLister (runtime/cri.Client, and
// the scoped and instrumented runtimes over one), Generic lists in wire
// form: it reads each sandbox's and container's ID and state from the
// protobuf bytes of the answers, and the labels and metadata only of
// those it does not know yet, where decoding the answers builds a map of
// labels and one of annotations for every item, the most of a relist's
// CPU at 1000 pods. The answers are not kept between relists. The result
// is the decoded relist's, field for field (the last value of a repeated
// field wins, messages merge, unknown fields are skipped); a malformed
// answer fails the relist as a failed decode does, leaving the records
// as they were; a WireLister that answers runtime.ErrUnimplemented (a
// wrapper over a runtime without the capability) is relisted with
// decoded lists from then on. On purpose, and unlike a decode, a label or
// annotation the relist does not read is not checked to be valid UTF-8.
//
// The relist is split in two, as raft splits RawNode from Node: a core
// without I/O keeps the records and decides which pods to inspect, which
// events each gets, and what is still owed to the pods a relist could not
// finish; a thin shell, Generic.Relist (which Evented calls too), lists
// the runtime, inspects the pods, updates the Cache and offers the events
// to the channel around it.
//
// # Events from the runtime
//
// Evented is the event-driven PLEG: it consumes the runtime's container
// event stream (CRI GetContainerEvents) and puts the status of each pod
// the events concern into the Cache: built from the statuses the events
// carry when the runtime sends them (as containerd 2.x does), else read
// (one read per pod for a burst of events); none when the Cache holds a
// status read after the events happened, as a pod worker's read-back
// after its own changes is. StreamsStatuses tells the pod workers whether
// the events bring the statuses, so that they can wait for them rather
// than read a pod back after starting it (podsync.Config);
// and sends ContainerStarted, ContainerDied and ContainerRemoved at once,
// as the kubelet's evented PLEG does; a Generic inside it relists every 5
// minutes as a safety net, and the Cache is declared current every 2
// seconds while a pod worker waits for a status newer than its last sync
// (at the instants a 2 s ticker would, releasing it as the kubelet's
// would), not at all while none waits: the kubelet's evented PLEG
// refreshes its cache's time on a ticker whatever waits, and a thousand
// idle agents in one process woke 500 times a second for it. While the
// stream works a StatusCache is live (SetLive): the readers that list the
// runtime's pods from it (housekeeping, the container collector) take it
// as current without those refreshes, every change reaching it as it
// happens. When the runtime answers Unimplemented (containerd 1.6), or the
// stream fails 5 times in a row, it relists every second instead, logs the
// switch once, retries the stream with a back-off up to 30 s, and goes
// back to events once the stream works. A relist in evented mode (the
// stream lost, or the safety net) sends nothing for a pod whose changes
// since the last relist the stream delivered, the Cache showing them: the
// kubelet's relist after a lost stream reports every change since its
// previous relist again, which after a burst of thousands of pods overflows
// the event channel and syncs every pod once more. NewAuto picks Evented for a
// runtime that can stream events (runtime/cri.Client, runtimetest) and
// Generic otherwise, so an agent calls it unconditionally:
//
//	gen, err := pleg.NewAuto(client, manager, cache, pleg.EventedOptions{})
//
// # Concurrency
//
// Generic and Evented are safe for concurrent use; Run must be called once. The Cache
// implementation is safe for concurrent use.
//
// # Errors
//
// A relist that fails is logged and retried on the next period; pods whose
// inspection failed are inspected again on the next relist. When the event
// channel is full, the event is not lost silently: the overflow is logged,
// counted, and the pod is re-examined on the next relist. These error lines
// can recur on every relist or event (a runtime that is down, a consumer
// that cannot keep up): each is logged the first time, then at most once a
// minute (once a minute per pod for a pod that cannot be inspected), with
// the count of the lines not logged ("suppressed") and, for the full
// channel, the events dropped so far ("droppedTotal").
//
// In detail: when GetPodStatus fails, the Cache records the error, the
// pod's events are held back and its records are not committed, so the
// next relist inspects it again and sends the same events once it
// succeeds. When the Events channel is full, Generic.DroppedEvents counts
// the loss, and the next relist inspects the pod again and sends a PodSync
// event for it (unless it sends other events for the pod), until one gets
// through. Healthy fails when no relist has listed the runtime within
// RelistThreshold.
package pleg
