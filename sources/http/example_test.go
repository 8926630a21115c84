package http_test

import (
	"context"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/sources/http"
)

func ExampleNew() {
	// A config server that hands out one pod.
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			w.WriteHeader(nethttp.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web"},
			"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}`)
	}))
	defer srv.Close()

	src, err := http.New(http.Options{
		URL:      srv.URL + "/pods",
		Header:   nethttp.Header{"Authorization": {"Bearer secret"}},
		NodeName: "node-1",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	snapshots := make(chan []*v1.Pod)
	done := make(chan error)
	go func() { done <- src.Run(ctx, snapshots) }()

	pods := <-snapshots
	fmt.Println(len(pods), pods[0].Name, pods[0].Spec.NodeName, pods[0].Status.Phase)
	cancel()
	<-done
	// Output: 1 web-node-1 node-1 Pending
}
