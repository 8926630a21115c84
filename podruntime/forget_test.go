package podruntime

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestForgetReleasesMaps checks that once every pod is forgotten the
// maps that held the pods' termination messages, waiting reasons and
// resize errors are not kept at the size of a churn's thousands of pods.
func TestForgetReleasesMaps(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	m, err := New(rt, rt, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const pods = 10000
	for i := range pods {
		uid := types.UID(fmt.Sprint("pod-", i))
		m.termMessages[uid] = map[string]string{"c": ""}
		m.reasons[uid] = map[string]waitingReason{"c": {}}
		m.resizeErrors[uid] = "x"
	}
	burst := []any{m.termMessages, m.reasons, m.resizeErrors}
	for i := range pods {
		m.Forget(types.UID(fmt.Sprint("pod-", i)))
	}
	for i, now := range []any{m.termMessages, m.reasons, m.resizeErrors} {
		if reflect.ValueOf(now).Len() != 0 {
			t.Fatalf("map %d: %d pods left", i, reflect.ValueOf(now).Len())
		}
		if reflect.ValueOf(now).UnsafePointer() == reflect.ValueOf(burst[i]).UnsafePointer() {
			t.Errorf("map %d is the burst's: it keeps the room of %d pods", i, pods)
		}
	}
}
