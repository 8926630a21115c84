package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// The bootstrap token of TestJoinAsNode, in kubeadm's group.
const (
	joinTokenID     = "nk0001"
	joinTokenSecret = "0123456789abcdef"
	joinTokenGroup  = "system:bootstrappers:kubeadm:default-node-token"
	// joinSigningDuration is the client certificates' lifetime: the
	// controller manager backdates them 5 minutes, so the agent renews
	// one 0.6 to 2.2 minutes after it is issued.
	joinSigningDuration = 3 * time.Minute
)

// TestJoinAsNode joins cmd/nodekit-agent to a cluster as a kubeadm node
// does: an API server of its own run with the Node authorizer and the
// NodeRestriction admission plugin, kube-controller-manager's CSR approver
// and signer, a bootstrap token and kubeadm's RBAC bindings. The agent
// gets only a bootstrap kubeconfig and a KubeletConfiguration file. It
// must register its Node with the file's taints and the flags' labels,
// run a pod with a configMap, a secret and a projected service-account
// token (on containerd), serve kubectl logs and exec and /configz, renew
// its client certificate and keep working once the first one expired,
// and the API server's audit log must show no request of the node
// denied.
//
// It needs root, containerd (NODEKIT_CRI_ENDPOINT, with busybox
// imported: hack/test.sh) and the API server's binaries
// (NODEKIT_KUBECONFIG); it builds kube-controller-manager and kubectl
// (cached). -short skips it: it waits for a certificate to expire.
func TestJoinAsNode(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the test waits minutes for a client certificate to expire")
	}
	kubeconfig(t)
	endpoint := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if endpoint == "" || os.Geteuid() != 0 {
		t.Skip("needs root and containerd (NODEKIT_CRI_ENDPOINT): run hack/test.sh as root")
	}
	kcm := hackBuild(t, "controller-manager.sh")
	kubectl := hackBuild(t, "kubectl.sh")
	tmp := t.TempDir()

	// The API server, as kubeadm runs it, with an audit log.
	policy := filepath.Join(tmp, "audit-policy.yaml")
	writeFile(t, policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
	audit := filepath.Join(tmp, "audit.log")
	t.Setenv("NODEKIT_APISERVER_AUTHORIZATION_MODE", "Node,RBAC")
	t.Setenv("NODEKIT_APISERVER_FLAGS", strings.Join([]string{
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth", "--audit-policy-file=" + policy, "--audit-log-path=" + audit,
	}, " "))
	srv := startAPIServer(t)
	admin := newClient(t, srv.kubeconfig())
	ctx := t.Context()

	// kube-controller-manager: the CSR approver and signer.
	pki := filepath.Join(srv.dir, "pki")
	kcmLog, err := os.Create(filepath.Join(tmp, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	kcmCmd := exec.Command(kcm, "--kubeconfig="+srv.kubeconfig(), "--leader-elect=false", "--secure-port=0",
		"--controllers=csrapproving,csrsigning,csrcleaner",
		"--cluster-signing-cert-file="+filepath.Join(pki, "ca.crt"), "--cluster-signing-key-file="+filepath.Join(pki, "ca.key"),
		"--cluster-signing-duration="+joinSigningDuration.String())
	kcmCmd.Stdout, kcmCmd.Stderr = kcmLog, kcmLog
	if err := kcmCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(t, kcmCmd, "kube-controller-manager", kcmLog.Name()) })

	// The bootstrap token and kubeadm's bindings.
	_, err = admin.CoreV1().Secrets("kube-system").Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + joinTokenID},
		Type:       "bootstrap.kubernetes.io/token",
		StringData: map[string]string{
			"token-id": joinTokenID, "token-secret": joinTokenSecret,
			"usage-bootstrap-authentication": "true", "auth-extra-groups": joinTokenGroup,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]struct{ role, group string }{
		"kubeadm:kubelet-bootstrap":                     {"system:node-bootstrapper", joinTokenGroup},
		"kubeadm:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", joinTokenGroup},
		"kubeadm:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	} {
		_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: b.group}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	// The bootstrap kubeconfig: the cluster's address and CA, the token.
	raw, err := clientcmd.LoadFromFile(srv.kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	var server string
	var ca []byte
	for _, c := range raw.Clusters {
		server, ca = c.Server, c.CertificateAuthorityData
	}
	bootKubeconfig := filepath.Join(tmp, "bootstrap-kubelet.conf")
	writeFile(t, bootKubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: boot
  user: {token: %s.%s}
contexts:
- name: c
  context: {cluster: c, user: boot}
current-context: c
`, server, base64.StdEncoding.EncodeToString(ca), joinTokenID, joinTokenSecret))

	// The KubeletConfiguration.
	nodeName := uniqueName("join")
	port := freePort(t)
	config := filepath.Join(tmp, "config.yaml")
	writeFile(t, config, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
port: %d
authentication:
  x509: {clientCAFile: %s}
  webhook: {enabled: true}
authorization: {mode: Webhook}
rotateCertificates: true
registerWithTaints:
- {key: nodekit.io/join, value: test, effect: NoSchedule}
containerRuntimeEndpoint: %s
podLogsDir: %s
cgroupRoot: /%s
nodeStatusUpdateFrequency: 2s
cgroupDriver: cgroupfs
featureGates: {NodeSwap: true}
staticPodPath: %s
# The host's disk is shared: its pressure must not evict the test's pods
# nor reclaim the images containerd cannot pull offline.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
`, port, filepath.Join(pki, "ca.crt"), endpoint, filepath.Join(tmp, "logs"), nodeName, filepath.Join(tmp, "manifests")))
	// A static pod, whose mirror pod the node creates.
	if err := os.Mkdir(filepath.Join(tmp, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tmp, "manifests", "static.yaml"), `apiVersion: v1
kind: Pod
metadata: {name: static, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: busybox:1.36, imagePullPolicy: IfNotPresent, command: [sh, -c, "sleep 3600"]}
`)

	// The node's cgroups: a root of the test's own, removed (with what is
	// left below it) once the agent stopped.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		mgr, err := cgroup.Open("")
		if err == nil {
			err = mgr.Destroy(ctx, nodeName)
		}
		if err != nil {
			t.Errorf("removing the cgroup root %s: %v", nodeName, err)
		}
	})

	// The agent, with only these.
	bin := filepath.Join(tmp, "nodekit-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/nodekit-agent").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	nodeKubeconfig := filepath.Join(tmp, "kubelet.conf")
	certDir := filepath.Join(tmp, "root", "pki")
	agentLog := filepath.Join(tmp, "agent.log")
	args := []string{"--config=" + config, "--bootstrap-kubeconfig=" + bootKubeconfig,
		"--kubeconfig=" + nodeKubeconfig, "--root-dir=" + filepath.Join(tmp, "root"), "--hostname-override=" + nodeName,
		"--node-labels=nodekit.io/pool=edge,nodekit.io/join=yes", "--v=1"}
	stopAgent := startJoinAgent(t, bin, agentLog, args...)
	t.Cleanup(func() { stopAgent() })

	t.Run("registers", func(t *testing.T) {
		eventually(t, 2*time.Minute, "the Node registered with the file's taint and the flags' labels", func() error {
			n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.Labels["nodekit.io/pool"] != "edge" || n.Labels["nodekit.io/join"] != "yes" {
				return fmt.Errorf("labels %v", n.Labels)
			}
			if !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool {
				return t.Key == "nodekit.io/join" && t.Value == "test" && t.Effect == v1.TaintEffectNoSchedule
			}) {
				return fmt.Errorf("taints %v", n.Spec.Taints)
			}
			if n.Status.NodeInfo.SystemUUID == "" {
				return fmt.Errorf("no systemUUID")
			}
			return nil
		})
		b, err := os.ReadFile(agentLog)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"featureGates[NodeSwap]"} {
			if bytes.Count(b, []byte(`field=`+f)) != 1 {
				t.Errorf("the agent's log does not report %s once", f)
			}
		}
		if bytes.Contains(b, []byte("field=cgroupDriver")) {
			t.Errorf("cgroupDriver: cgroupfs, nodekit's, reported as unsupported")
		}
	})
	t.Run("mirror pod", func(t *testing.T) {
		eventually(t, 2*time.Minute, "the static pod's mirror pod running", func() error {
			p, err := admin.CoreV1().Pods("default").Get(ctx, "static-"+nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Annotations[v1.MirrorPodAnnotationKey] == "" || p.Status.Phase != v1.PodRunning {
				return fmt.Errorf("annotations %v, phase %s", p.Annotations, p.Status.Phase)
			}
			return nil
		})
	})
	first := clientCert(t, certDir)
	if first.Subject.CommonName != "system:node:"+nodeName || len(first.Subject.Organization) != 1 || first.Subject.Organization[0] != "system:nodes" {
		t.Fatalf("client certificate subject %v", first.Subject)
	}
	if _, err := clientcmd.LoadFromFile(nodeKubeconfig); err != nil {
		t.Fatalf("the node's kubeconfig: %v", err)
	}

	ns := uniqueName("join")
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Before the agent stops: its pods go, the agent stopping them and
	// tearing their volumes down; what is left goes through CRI.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = os.Remove(filepath.Join(tmp, "manifests", "static.yaml"))
		var podDir string
		if p, err := admin.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{}); err == nil {
			podDir = filepath.Join(tmp, "root", "pods", string(p.UID))
		}
		_ = admin.CoreV1().Pods(ns).Delete(ctx, "reader", metav1.DeleteOptions{})
		for {
			_, err := admin.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{})
			_, errMirror := admin.CoreV1().Pods("default").Get(ctx, "static-"+nodeName, metav1.GetOptions{})
			_, errDir := os.Stat(podDir)
			if apierrors.IsNotFound(err) && apierrors.IsNotFound(errMirror) && (podDir == "" || os.IsNotExist(errDir)) {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("the agent did not remove its pods within a minute: reader %v, mirror pod %v, pod directory %v", err, errMirror, errDir)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		removeSandboxes(t, endpoint, map[string]string{runtime.LabelPodNamespace: ns})
		removeSandboxes(t, endpoint, map[string]string{runtime.LabelPodNamespace: "default", runtime.LabelPodName: "static-" + nodeName})
	})

	t.Run("pod with configMap, secret and token", func(t *testing.T) {
		mustCreate(t, admin, ns, nodeName)
		eventually(t, 3*time.Minute, "the pod running", func() error {
			p, err := admin.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != v1.PodRunning {
				return fmt.Errorf("phase %s, %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			return nil
		})
	})

	t.Run("kubectl logs and exec", func(t *testing.T) {
		kc := func(args ...string) (string, error) {
			cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig=" + srv.kubeconfig(), "-n", ns}, args...)...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		eventually(t, time.Minute, "kubectl logs", func() error {
			out, err := kc("logs", "reader")
			if err != nil || !strings.Contains(out, "cm=from-configmap") || !strings.Contains(out, "secret=from-secret") || !strings.Contains(out, "token=yes") {
				return fmt.Errorf("%v: %q", err, out)
			}
			return nil
		})
		out, err := kc("exec", "reader", "--", "cat", "/etc/cm/key")
		if err != nil || out != "from-configmap" {
			t.Errorf("kubectl exec: %v: %q", err, out)
		}
		// /configz through the API server's node proxy.
		b, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "configz").DoRaw(ctx)
		if err != nil {
			t.Fatalf("configz: %v", err)
		}
		var cz struct {
			KubeletConfig map[string]any `json:"kubeletconfig"`
		}
		if err := json.Unmarshal(b, &cz); err != nil || cz.KubeletConfig["rotateCertificates"] != true || cz.KubeletConfig["maxPods"] != float64(110) {
			t.Errorf("configz: %v: %s", err, b)
		}
	})

	t.Run("client certificate rotated", func(t *testing.T) {
		var second *x509.Certificate
		eventually(t, joinSigningDuration+time.Minute, "a new client certificate", func() error {
			c := clientCert(t, certDir)
			if c.SerialNumber.Cmp(first.SerialNumber) == 0 {
				return fmt.Errorf("still %s", c.SerialNumber)
			}
			second = c
			return nil
		})
		// Past the first one's expiry the node still renews its Lease:
		// the transport took the new certificate.
		wait := time.Until(first.NotAfter) + 5*time.Second
		t.Logf("renewed: %s (expires %s); waiting %v for the first to expire", second.SerialNumber, second.NotAfter, wait.Round(time.Second))
		time.Sleep(wait)
		eventually(t, 30*time.Second, "a Lease renewal after the first certificate expired", func() error {
			l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(first.NotAfter) {
				return fmt.Errorf("renewed at %v", l.Spec.RenewTime)
			}
			return nil
		})
	})

	t.Run("restart reuses the certificate", func(t *testing.T) {
		stopAgent()
		before := clientCert(t, certDir)
		stopAgent = startJoinAgent(t, bin, agentLog, args...)
		eventually(t, time.Minute, "a Lease renewal after the restart", func() error {
			l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > 5*time.Second {
				return fmt.Errorf("renewed at %v", l.Spec.RenewTime)
			}
			return nil
		})
		csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		byToken := 0
		for _, c := range csrs.Items {
			if c.Spec.Username == "system:bootstrap:"+joinTokenID {
				byToken++
			}
		}
		if byToken != 1 {
			t.Errorf("%d CertificateSigningRequests made with the bootstrap token, want the first start's only", byToken)
		}
		if after := clientCert(t, certDir); after.NotAfter.Before(before.NotAfter) {
			t.Errorf("the certificate went back to an older one")
		}
	})

	t.Run("no request denied", func(t *testing.T) {
		f, err := os.Open(audit)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		users := map[string]int{}
		for sc.Scan() {
			var ev struct {
				Stage, Verb, RequestURI string
				User                    struct{ Username string }
				ResponseStatus          *struct{ Code int }
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				continue
			}
			u := ev.User.Username
			if u != "system:node:"+nodeName && u != "system:bootstrap:"+joinTokenID {
				continue
			}
			if ev.Stage == "ResponseComplete" {
				users[u]++
			}
			if ev.ResponseStatus != nil && (ev.ResponseStatus.Code == 401 || ev.ResponseStatus.Code == 403) {
				t.Errorf("%s denied (%d): %s %s", u, ev.ResponseStatus.Code, ev.Verb, ev.RequestURI)
			}
		}
		if users["system:node:"+nodeName] == 0 || users["system:bootstrap:"+joinTokenID] == 0 {
			t.Errorf("requests by user in the audit log: %v", users)
		}
		t.Logf("requests by user: %v", users)
	})
}

// mustCreate creates the reader pod and what it refers to.
func mustCreate(t *testing.T, c kubernetes.Interface, ns, nodeName string) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"key": "from-configmap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, StringData: map[string]string{"key": "from-secret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Spec: v1.PodSpec{
			NodeName:           nodeName,
			ServiceAccountName: "default",
			// sh as PID 1 ignores SIGTERM.
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Tolerations:                   []v1.Toleration{{Key: "nodekit.io/join", Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{
				Name: "main", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", `echo cm=$(cat /etc/cm/key) secret=$(cat /etc/secret/key) token=$(test -s /var/run/secrets/tokens/token && echo yes); sleep 3600`},
				VolumeMounts: []v1.VolumeMount{
					{Name: "cm", MountPath: "/etc/cm"}, {Name: "sec", MountPath: "/etc/secret"}, {Name: "token", MountPath: "/var/run/secrets/tokens"},
				},
			}},
			Volumes: []v1.Volume{
				{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
				{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
				{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{
					ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)},
				}}}}},
			},
		},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hackBuild builds a binary with the hack script named (cached) and
// returns its path; a failure fails the test where the components are
// required (NODEKIT_E2E_REQUIRED), else skips it.
func hackBuild(t *testing.T, script string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "hack", script))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	out, err := exec.CommandContext(t.Context(), "bash", path, "build").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		if os.Getenv("NODEKIT_E2E_REQUIRED") != "" {
			t.Fatalf("hack/%s build: %v\n%s", script, err, stderr)
		}
		t.Skipf("hack/%s build: %v\n%s", script, err, stderr)
	}
	t.Logf("hack/%s build: %v", script, time.Since(begin).Round(time.Millisecond))
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startJoinAgent starts the agent binary, appending to logPath, and
// returns what stops it (SIGTERM, then SIGKILL after 30 s; the end of its
// log shown when the test failed). Stopping twice does nothing.
func startJoinAgent(t *testing.T, bin, logPath string, args ...string) (stop func()) {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stopProcess(t, cmd, "nodekit-agent", logPath)
			f.Close()
		})
	}
}

// stopProcess stops cmd with SIGTERM (SIGKILL after 30 s) and shows the
// end of its log when the test failed.
func stopProcess(t *testing.T, cmd *exec.Cmd, name, logPath string) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("%s did not stop within 30 s of SIGTERM", name)
	}
	if t.Failed() {
		if b, err := os.ReadFile(logPath); err == nil {
			if len(b) > 16<<10 {
				b = b[len(b)-16<<10:]
			}
			t.Logf("the end of %s's log:\n%s", name, b)
		}
	}
}

// clientCert reads the node's current client certificate in certDir.
func clientCert(t *testing.T, certDir string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(certDir, "kubelet-client-current.pem"))
	if err != nil {
		t.Fatal(err)
	}
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			t.Fatal("no certificate in kubelet-client-current.pem")
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

// removeSandboxes stops and removes, through CRI, the sandboxes with the
// labels given.
func removeSandboxes(t *testing.T, endpoint string, labels map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := cri.New(ctx, endpoint)
	if err != nil {
		t.Errorf("removing the pods %v: %v", labels, err)
		return
	}
	defer rs.Close()
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: labels})
	if err != nil {
		t.Errorf("removing the pods %v: %v", labels, err)
		return
	}
	for _, sb := range sbs {
		if err := rs.StopPodSandbox(ctx, sb.Id); err != nil {
			t.Errorf("stopping sandbox %s: %v", sb.Id, err)
		}
		if err := rs.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Errorf("removing sandbox %s: %v", sb.Id, err)
		}
	}
}
