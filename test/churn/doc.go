// Package churn tests an agent under pod churn: pods replaced every
// second, then all deleted, on the in-memory runtime and (as root) the
// process runtime. It has no code of its own, only a soak test (TestChurn,
// short enough for CI) and a long benchmark (BenchmarkChurn) that report
// what the deleted pods left: processes, runtime records, directories,
// goroutines, heap and RSS, against the agent before the churn.
//
//	go test ./test/churn/
//	NODEKIT_CHURN_RUNTIME=memory NODEKIT_CHURN_PODS=300 NODEKIT_CHURN_DURATION=3m \
//		go test -run '^$' -bench BenchmarkChurn -benchtime 1x ./test/churn/
package churn
