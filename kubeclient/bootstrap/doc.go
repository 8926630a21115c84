// Package bootstrap gives a node agent its credentials to the API server
// the way the kubelet's TLS bootstrap does (--bootstrap-kubeconfig,
// --kubeconfig, --cert-dir, rotateCertificates): with only a bootstrap
// kubeconfig (a bootstrap token), it requests a client certificate
// (CertificateSigningRequest of signer
// kubernetes.io/kube-apiserver-client-kubelet, common name
// system:node:<name>, organization system:nodes, an ECDSA P-256 key),
// waits until the cluster approves and signs it, keeps it in the
// certificate directory (kubelet-client-current.pem, a link to the latest
// kubelet-client-<date>.pem, as the kubelet's) and writes a kubeconfig
// naming it. Later starts reuse that kubeconfig. With Rotate it renews the
// certificate at 70 to 90 % of its lifetime with the node's own
// credentials, and the rest.Config it gives presents the current
// certificate at each TLS handshake, its connections closed on each
// renewal (the kubelet's updateTransport).
//
// # Usage
//
//	c, err := bootstrap.New(bootstrap.Options{NodeName: name, Kubeconfig: "/etc/kubernetes/nodekit.conf",
//		BootstrapKubeconfig: "/etc/kubernetes/bootstrap-kubelet.conf", CertDir: "/var/lib/nodekit/pki", Rotate: true})
//	g.Go(func() error { return c.Run(ctx) })
//	cfg, err := c.Wait(ctx)             // blocks until a certificate is issued
//	client, err := kubeclient.NewForConfig(cfg)
//
// # Errors
//
// An API server that is down, a request that is denied or not issued
// within 15 minutes: the request is made again after a back-off (2 s
// doubling to 32 s) while Wait keeps waiting; an unreadable kubeconfig or
// certificate directory: Run and Wait return the error.
//
// # Differences from the kubelet
//
// The certificate is requested, kept and renewed by nodekit's own code
// (as the node API's serving certificate, nodeapi.ServingCertificate)
// rather than client-go's certificate manager: see package nodeapi. Each
// file is written to a temporary file and renamed. A kubeconfig whose
// credentials are not the kept pair (a token, a certificate elsewhere) is
// used as it is and never rotated.
package bootstrap
