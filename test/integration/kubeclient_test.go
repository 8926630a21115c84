package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kubeclient"
)

// TestKubeClient makes every call of kubeclient.Interface against the real
// API server, in JSON and in protobuf, and checks what the server stored
// or answered with the test's own client-go clientset.
func TestKubeClient(t *testing.T) {
	path := kubeconfig(t)
	api := newClient(t, path)
	for _, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(ct, func(t *testing.T) {
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			cfg.QPS, cfg.Burst = 50, 100
			cfg.ContentType = ct
			c, err := kubeclient.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			ns := uniqueName("kubeclient")
			if _, err := api.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = api.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}) })
			nodeName := uniqueName("kc-node")
			t.Cleanup(func() { _ = api.CoreV1().Nodes().Delete(t.Context(), nodeName, metav1.DeleteOptions{}) })

			// Nodes: create, get, status patch.
			n, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
			if err != nil || n.UID == "" {
				t.Fatalf("node create: %v, %v", n, err)
			}
			if got, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil || got.UID != n.UID {
				t.Fatalf("node get: %v, %v", got, err)
			}
			patch := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`)
			if _, err := c.CoreV1().Nodes().Patch(ctx, nodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				t.Fatalf("node status patch: %v", err)
			}
			if got, _ := api.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "KubeletReady" {
				t.Errorf("node status after the patch: %+v", got.Status.Conditions)
			}

			// Pods: watch, create, get, list by node, status patch, delete.
			pods := c.CoreV1().Pods(ns)
			sel := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
			w, err := c.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				t.Fatalf("pod watch: %v", err)
			}
			defer w.Stop()
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec:       v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			}
			created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("pod create: %v", err)
			}
			select {
			case e := <-w.ResultChan():
				if p, ok := e.Object.(*v1.Pod); e.Type != watch.Added || !ok || p.UID != created.UID {
					t.Errorf("pod watch event %v %T, want ADDED of the pod", e.Type, e.Object)
				}
			case <-time.After(30 * time.Second):
				t.Error("no pod watch event within 30s")
			}
			if got, err := pods.Get(ctx, "p", metav1.GetOptions{}); err != nil || got.UID != created.UID {
				t.Errorf("pod get: %v", err)
			}
			if l, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel}); err != nil || len(l.Items) != 1 {
				t.Errorf("pod list by node: %v, %v", l, err)
			}
			sp := []byte(`{"metadata":{"uid":"` + string(created.UID) + `"},"status":{"phase":"Running"}}`)
			if got, err := pods.Patch(ctx, "p", types.StrategicMergePatchType, sp, metav1.PatchOptions{}, "status"); err != nil || got.Status.Phase != v1.PodRunning {
				t.Errorf("pod status patch: %v", err)
			}
			if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &created.UID}}); err != nil {
				t.Errorf("pod delete: %v", err)
			}
			if _, err := api.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err == nil {
				t.Error("the pod is still there after a delete with grace period 0")
			}

			// Events: create, update, patch.
			ev := &v1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e", Namespace: ns},
				InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"},
				Reason:         "Started", Message: "one", Type: v1.EventTypeNormal, Count: 1,
			}
			ev, err = c.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("event create: %v", err)
			}
			ev.Message = "two"
			if ev, err = c.CoreV1().Events(ns).Update(ctx, ev, metav1.UpdateOptions{}); err != nil || ev.Message != "two" {
				t.Errorf("event update: %v", err)
			}
			if got, err := c.CoreV1().Events(ns).Patch(ctx, "e", types.StrategicMergePatchType, []byte(`{"count":3}`), metav1.PatchOptions{}); err != nil || got.Count != 3 {
				t.Errorf("event patch: %v", err)
			}

			// ConfigMaps, Secrets, ServiceAccounts (and a token), Services.
			if _, err := api.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{}); err != nil || cm.Data["k"] != "v" {
				t.Errorf("configmap get: %v, %v", cm, err)
			}
			if _, err := api.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if s, err := c.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{}); err != nil || string(s.Data["k"]) != "v" {
				t.Errorf("secret get: %v, %v", s, err)
			}
			if _, err := api.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if sa, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "sa", metav1.GetOptions{}); err != nil || sa.Name != "sa" {
				t.Errorf("serviceaccount get: %v, %v", sa, err)
			}
			tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sa", &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
			}, metav1.CreateOptions{})
			if err != nil || tr.Status.Token == "" {
				t.Fatalf("token request: %v", err)
			}
			if _, err := api.CoreV1().Services(ns).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if l, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
				t.Errorf("service list: %v, %v", l, err)
			}
			sw, err := c.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Errorf("service watch: %v", err)
			} else {
				sw.Stop()
			}

			// RuntimeClasses: list and watch.
			rcName := uniqueName("kc-rc")
			if _, err := api.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rcName}, Handler: "h"}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = api.NodeV1().RuntimeClasses().Delete(t.Context(), rcName, metav1.DeleteOptions{}) })
			if l, err := c.NodeV1().RuntimeClasses().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", rcName).String()}); err != nil || len(l.Items) != 1 || l.Items[0].Handler != "h" {
				t.Errorf("runtimeclass list: %v, %v", l, err)
			}
			if rw, err := c.NodeV1().RuntimeClasses().Watch(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("runtimeclass watch: %v", err)
			} else {
				rw.Stop()
			}

			// Leases: create, get, update.
			leases := c.CoordinationV1().Leases(ns)
			l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(nodeName)}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("lease create: %v", err)
			}
			if l, err = leases.Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
				t.Fatalf("lease get: %v", err)
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				t.Errorf("lease update: %v", err)
			}
			if got, _ := api.CoordinationV1().Leases(ns).Get(ctx, nodeName, metav1.GetOptions{}); got.Spec.RenewTime == nil {
				t.Error("the lease has no renew time after the update")
			}

			// CertificateSigningRequests: create, get, list, watch.
			csrName := uniqueName("kc-csr")
			csrs := c.CertificatesV1().CertificateSigningRequests()
			t.Cleanup(func() {
				_ = api.CertificatesV1().CertificateSigningRequests().Delete(t.Context(), csrName, metav1.DeleteOptions{})
			})
			if _, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
				ObjectMeta: metav1.ObjectMeta{Name: csrName},
				Spec: certificatesv1.CertificateSigningRequestSpec{
					Request:    csrPEM(t, nodeName),
					SignerName: certificatesv1.KubeletServingSignerName,
					Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
				},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("csr create: %v", err)
			}
			if _, err := csrs.Get(ctx, csrName, metav1.GetOptions{}); err != nil {
				t.Errorf("csr get: %v", err)
			}
			byName := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", csrName).String()}
			if l, err := csrs.List(ctx, byName); err != nil || len(l.Items) != 1 {
				t.Errorf("csr list: %v, %v", l, err)
			}
			if cw, err := csrs.Watch(ctx, byName); err != nil {
				t.Errorf("csr watch: %v", err)
			} else {
				select {
				case e := <-cw.ResultChan():
					if _, ok := e.Object.(*certificatesv1.CertificateSigningRequest); e.Type != watch.Added || !ok {
						t.Errorf("csr watch event %v %T, want ADDED of the request", e.Type, e.Object)
					}
				case <-time.After(30 * time.Second):
					t.Error("no csr watch event within 30s")
				}
				cw.Stop()
			}

			// TokenReviews and SubjectAccessReviews.
			rev, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
			if err != nil || !rev.Status.Authenticated || rev.Status.User.Username != "system:serviceaccount:"+ns+":sa" {
				t.Errorf("token review: %+v, %v", rev, err)
			}
			sar, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:" + ns + ":sa",
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Resource: "nodes"},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("subject access review: %v", err)
			} else if sar.Status.Allowed {
				t.Error("a service account without a role may delete nodes")
			}
		})
	}
}

// csrPEM returns a PEM certificate request for the node's serving name.
func csrPEM(t *testing.T, nodeName string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		DNSNames: []string{nodeName},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
