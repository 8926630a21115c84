package podworker

import (
	"context"
	"fmt"
	"time"

	"github.com/nodekit/nodekit/pleg"
)

func ExampleNew() {
	// sync implements SyncFuncs (the agent's SyncHandler); cache is the
	// PLEG's status cache.
	var sync SyncFuncs = &fakeSync{}
	var cache pleg.Cache = &fakeCache{}

	queue := NewQueue()
	workers, err := New(sync, Options{Cache: cache, Queue: queue})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- workers.Run(ctx) }()

	pod := newPod("a")
	completed := make(chan struct{})
	workers.UpdatePod(UpdateOptions{UpdateType: SyncPodCreate, Pod: pod})
	workers.UpdatePod(UpdateOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{CompletedCh: completed}})
	<-completed
	fmt.Println("terminated:", workers.IsPodKnownTerminated(pod.UID))

	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// terminated: true
	// run: <nil>
}

func ExampleNewQueue() {
	queue := NewQueue()
	queue.Enqueue("b", 0)
	queue.Enqueue("a", 0)
	queue.Enqueue("later", time.Hour)
	// The sync loop, every second:
	fmt.Println(queue.GetWork())
	fmt.Println(queue.GetWork())
	// Output:
	// [a b]
	// []
}
