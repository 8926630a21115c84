package nodeapi_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/nodeapi"
)

// TestServer serves over TLS with a self-signed certificate, refuses
// plain HTTP, and on cancel ends a log follow in flight and returns nil
// with no goroutine left.
func TestServer(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFixture(t)
	h, err := nodeapi.New(f.options(nil))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, err := nodeapi.NewServer(h, nodeapi.ServerOptions{Listener: ln, CertDir: dir, Hostnames: []string{"node-1"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	addr, err := srv.Addr(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// The certificate is the one kept in CertDir, for the node's names.
	pem, err := readFile(dir + "/kubelet.crt")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "node-1"}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Get("https://" + addr.String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("healthz: %d %q", resp.StatusCode, body)
	}

	plain := &http.Transport{}
	defer plain.CloseIdleConnections()
	resp, err = (&http.Client{Transport: plain}).Get("http://" + addr.String() + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP served: %d", resp.StatusCode)
		}
	}

	// A follow in flight ends with the server.
	resp, err = client.Get("https://" + addr.String() + "/containerLogs/default/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(rest), "hello") {
		t.Errorf("rest of the stream %q", rest)
	}
}
