package nodeapi_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/nodeapi"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A handler over a pod list and the in-memory runtime, without
// authentication (as behind an access control of its own).
func ExampleNew() {
	pods := []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1"}}}
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	h, err := nodeapi.New(nodeapi.Options{
		NodeName: "node-1",
		Pods:     nodeapi.PodsFunc(func() []*v1.Pod { return pods }),
		Runtime:  rt,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	fmt.Println(rec.Code, rec.Body)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/containerLogs/default/web/app", nil))
	fmt.Println(rec.Code) // no ContainerLogger given
	// Output:
	// 200 ok
	// 404
}

// The kubelet's authentication and authorization, delegated to the API
// server.
func ExampleNewDelegatingAuth() {
	client := fake.NewClientset() // a real clientset in an agent
	auth, err := nodeapi.NewDelegatingAuth(clientset.From(client), nodeapi.AuthOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	h, _ := nodeapi.New(nodeapi.Options{NodeName: "node-1", Auth: auth})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/pods", nil)) // no credentials
	fmt.Println(rec.Code, rec.Body)
	// Output: 401 Unauthorized
}

// A server on a port of its own with a self-signed certificate, stopped
// by its context.
func ExampleNewServer() {
	h, _ := nodeapi.New(nodeapi.Options{NodeName: "node-1"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := nodeapi.NewServer(h, nodeapi.ServerOptions{Listener: ln, Hostnames: []string{"localhost"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	addr, _ := srv.Addr(ctx)
	tr := &http.Transport{}
	// Plain HTTP to a TLS server: refused.
	if resp, err := (&http.Client{Transport: tr}).Get("http://" + addr.String() + "/healthz"); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	tr.CloseIdleConnections()
	cancel()
	fmt.Println(<-done)
	// Output:
	// 400
	// <nil>
}

// A streaming server for a runtime that can only run commands to
// completion.
func ExampleNewStreamingServer() {
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	ss, err := nodeapi.NewStreamingServer(nodeapi.ExecOnlyRuntime{Runtime: rt}, nodeapi.StreamingServerOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ss.Run(ctx) }()
	// Pass ss as Options.Streamer.
	cancel()
	fmt.Println(<-done)
	// Output: <nil>
}

// A server whose certificate the cluster signs and that rotates: each TLS
// handshake takes the current one. Run both until the agent stops.
func ExampleNewServingCertificate() {
	client := fake.NewClientset() // the agent's client of the API server
	cert, err := nodeapi.NewServingCertificate(nodeapi.ServingCertificateOptions{
		Client:    client.CertificatesV1().CertificateSigningRequests(),
		NodeName:  "node-1",
		Hostnames: []string{"node-1"},
		IPs:       []net.IP{net.ParseIP("10.0.0.7")},
		CertDir:   "/var/lib/nodekit/pki",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := nodeapi.NewServer(http.NotFoundHandler(), nodeapi.ServerOptions{GetCertificate: cert.GetCertificate})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = srv // go cert.Run(ctx); srv.Run(ctx)
	_, err = cert.GetCertificate(nil)
	fmt.Println(err != nil)
	// Output: true
}
