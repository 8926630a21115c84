package apiserver_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// outage makes the client's pod lists hang, as with an API server that
// does not answer, until restore is called. (A list that fails instead
// goes through client-go's process-wide error handler, whose rate limiter
// compares times across synctest bubbles and can sleep for years of the
// bubble's time; the real API server's outage is test/integration's.)
type outage struct {
	up   chan struct{}
	once sync.Once
}

func down(client *fake.Clientset) *outage {
	o := &outage{up: make(chan struct{})}
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-o.up
		return false, nil, nil
	})
	return o
}

func (o *outage) restore() { o.once.Do(func() { close(o.up) }) }

func checkpointSource(t *testing.T, client *fake.Clientset, path string) *apiserver.Source {
	t.Helper()
	src, err := apiserver.New(clientset.From(client), node, apiserver.Options{CheckpointPath: path, MaxRetryInterval: time.Second, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestCheckpointOfflineRestart: a source writes its snapshots to the
// checkpoint; restarted while the API server is unreachable, it sends the
// checkpoint's pods after CheckpointGrace (and nothing before); once the
// server lists again, it sends the server's pods (here one pod deleted and
// one created meanwhile).
func TestCheckpointOfflineRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "checkpoints", "pods.json")
		client := fake.NewClientset(pod("a", "one"), pod("a", "two"))
		snaps, stop := start(t, checkpointSource(t, client, path))
		synctest.Wait()
		if _, got := last(snaps); !cmp.Equal(names(got), []string{"a/one", "a/two"}) {
			t.Fatalf("first snapshot %v", names(got))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("no checkpoint written: %v", err)
		}

		// The API server goes away; meanwhile a pod is deleted and another
		// created there.
		out := down(client)
		if err := client.CoreV1().Pods("a").Delete(t.Context(), "two", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Pods("a").Create(t.Context(), pod("a", "three"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		snaps, stop = start(t, checkpointSource(t, client, path))
		time.Sleep(apiserver.DefaultCheckpointGrace - time.Millisecond)
		synctest.Wait()
		if n, _ := last(snaps); n != 0 {
			t.Fatalf("%d snapshots before the grace ended", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if _, got := last(snaps); !cmp.Equal(names(got), []string{"a/one", "a/two"}) {
			t.Fatalf("snapshot without the API server = %v, want the checkpoint's a/one a/two", names(got))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n, _ := last(snaps); n != 0 {
			t.Fatalf("%d snapshots while the API server is still down, want none", n)
		}

		out.restore()
		time.Sleep(time.Second)
		synctest.Wait()
		if _, got := last(snaps); !cmp.Equal(names(got), []string{"a/one", "a/three"}) {
			t.Errorf("snapshot once the server is back = %v, want a/one a/three", names(got))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCheckpointNotUsedWhenListed: with the API server reachable the
// checkpoint is never sent, even when it differs.
func TestCheckpointNotUsedWhenListed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "pods.json")
		old := fake.NewClientset(pod("a", "old"))
		snaps, stop := start(t, checkpointSource(t, old, path))
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		last(snaps)
		snaps, stop = start(t, checkpointSource(t, fake.NewClientset(pod("a", "new")), path))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		n, got := last(snaps)
		if n != 1 || !cmp.Equal(names(got), []string{"a/new"}) {
			t.Errorf("%d snapshots, last %v; want one, the server's a/new", n, names(got))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCheckpointOfAnotherNodeOrBroken: a checkpoint of another node, or one
// that does not decode, is not used; the source waits for the API server.
func TestCheckpointOfAnotherNodeOrBroken(t *testing.T) {
	for name, content := range map[string]string{
		"other node": `{"version":1,"nodeName":"other","pods":[{"metadata":{"name":"x","namespace":"a","uid":"u"}}]}`,
		"broken":     `{"version":1,"nodeName":"node-1","pods":[`,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "pods.json")
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				client := fake.NewClientset()
				out := down(client)
				snaps, stop := start(t, checkpointSource(t, client, path))
				time.Sleep(time.Minute)
				synctest.Wait()
				if n, _ := last(snaps); n != 0 {
					t.Errorf("%d snapshots from an unusable checkpoint, want none", n)
				}
				out.restore()
				if err := stop(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestCheckpointWriteFailure: when the checkpoint cannot be written, the
// snapshot is still sent, and no checkpoint file is left to be used after
// a restart.
func TestCheckpointWriteFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "pods.json")
		client := fake.NewClientset(pod("a", "one"))
		snaps, stop := start(t, checkpointSource(t, client, path))
		synctest.Wait()
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
		// A non-empty directory where the checkpoint goes: the rename
		// cannot replace it (a read-only directory would not stop root).
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Pods("a").Create(t.Context(), pod("a", "two"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if _, got := last(snaps); !cmp.Equal(names(got), []string{"a/one", "a/two"}) {
			t.Errorf("snapshot after a failed write = %v, want it sent anyway", names(got))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
			t.Errorf("a checkpoint file is there after a failed write")
		}
	})
}

// TestNoCheckpoint: with NoCheckpoint the source writes no checkpoint,
// whatever CheckpointPath says, and sends the server's pods as before.
func TestNoCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "pods.json")
		client := fake.NewClientset(pod("a", "one"))
		src, err := apiserver.New(clientset.From(client), node, apiserver.Options{CheckpointPath: path, NoCheckpoint: true, Logger: testr.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		snaps, stop := start(t, src)
		synctest.Wait()
		if _, got := last(snaps); !cmp.Equal(names(got), []string{"a/one"}) {
			t.Errorf("snapshot %v, want a/one", names(got))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("checkpoint %s: %v, want none written", path, err)
		}
	})
}
