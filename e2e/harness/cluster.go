//go:build nodee2e

package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The cluster's addresses. They exist only in the network namespace the
// cluster e2e runs in (EnterClusterNamespaces), so they never meet the
// machine's own.
const (
	// ClusterNodeIP is the node's address, on its own interface: the
	// apiserver advertises it and the kubelet registers it.
	ClusterNodeIP = "10.250.0.1"
	// ClusterServiceCIDR holds the Services' cluster IPs; the first is the
	// apiserver's (kubernetes.default).
	ClusterServiceCIDR = "10.0.0.0/24"
	// ClusterPodCIDR holds the pods' addresses: each node's bridge network
	// is a /24 of it (node's the first, node2's the second).
	ClusterPodCIDR = "10.244.0.0/16"
	// The second node, node2, has a network namespace of its own, linked
	// to the cluster's by a veth pair: ClusterNode2IP on its side,
	// clusterLinkIP on the cluster's (its default gateway, and where it
	// reaches the registry).
	ClusterNode2IP = "10.250.1.2"
	clusterLinkIP  = "10.250.1.1"
	apiserverPort  = 6443
	// clusterNSEnv is set in the environment of the test binary that runs
	// in the cluster's namespaces.
	clusterNSEnv = "SANDBOX_WEBHOOK_CLUSTER_NS"
)

// ClusterTools are the commands a cluster needs besides the node's: the
// pod network's plugins come from Debian's containernetworking-plugins,
// Service routing (kube-proxy) needs iptables.
var ClusterTools = []string{"ip", "iptables", "unshare"}

// CNIBinDir is where Debian's containernetworking-plugins installs the
// plugins.
const CNIBinDir = "/usr/lib/cni"

// InClusterNamespaces reports whether this process runs in the cluster's
// namespaces (RunInClusterNamespaces started it).
func InClusterNamespaces() bool { return os.Getenv(clusterNSEnv) != "" }

// RunInClusterNamespaces runs the test binary again, with the same
// arguments and env added to its environment, in a new network namespace
// and a new mount namespace whose mounts are private, and returns its exit
// code. Nothing the cluster does there reaches the machine's network,
// routes, iptables or mounts, and the namespaces are gone when the last
// process in them exits.
func RunInClusterNamespaces(env ...string) (int, error) {
	cmd := exec.Command("unshare", append([]string{"--net", "--mount", "--propagation", "private", "--", os.Args[0]}, os.Args[1:]...)...)
	cmd.Env = append(append(os.Environ(), env...), clusterNSEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// SetUpClusterNamespaces, in the cluster's namespaces, brings up the
// loopback and the node's interface with ClusterNodeIP (one end of a veth
// pair whose other end stays in the namespace: the kernel here has no
// dummy interfaces), hides /run, /var/lib and /var/log behind empty tmpfs
// mounts (the daemons write their locks and state there), and makes node2's
// network namespace: a veth pair to the cluster's, a route each way for the
// pods' addresses, and forwarding on, as between two nodes of one subnet.
func SetUpClusterNamespaces() error {
	if !InClusterNamespaces() {
		return errors.New("not in the cluster's namespaces")
	}
	script := strings.Join([]string{
		"ip link set lo up",
		"ip link add node0 type veth peer name node0-peer",
		"ip addr add " + ClusterNodeIP + "/24 dev node0",
		"ip link set node0 up",
		"ip link set node0-peer up",
		// A default route, as a node has: without one, connecting to a
		// Service's cluster IP fails before kube-proxy's rules see it.
		"ip route add default dev node0",
		"mount -t tmpfs -o mode=0755 cluster-run /run",
		"mount -t tmpfs -o mode=0755 cluster-var-lib /var/lib",
		"mount -t tmpfs -o mode=0755 cluster-var-log /var/log",
		"sysctl -qw net.ipv4.ip_forward=1",
		"ip netns add node2",
		"ip link add node2-link type veth peer name node2 netns node2",
		"ip addr add " + clusterLinkIP + "/24 dev node2-link",
		"ip link set node2-link up",
		"ip route add " + node2PodCIDR + " via " + ClusterNode2IP,
		"ip netns exec node2 sh -c '" + strings.Join([]string{
			"ip link set lo up",
			"ip addr add " + ClusterNode2IP + "/24 dev node2",
			"ip link set node2 up",
			"ip route add default via " + clusterLinkIP,
			"sysctl -qw net.ipv4.ip_forward=1",
		}, " && ") + "'",
	}, " && ")
	if out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("setting up the cluster's namespaces: %w\n%s", err, out)
	}
	return nil
}

// ClusterOptions says how to run a cluster.
type ClusterOptions struct {
	// Dir holds every file of the cluster (PKI, etcd's data, the node's
	// state, logs).
	Dir string
	// Bin holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kube-proxy and kubelet (hack/tools.sh).
	Bin string
	// Busybox is a static busybox for the node image.
	Busybox string
	// Images are OCI archives to import into the node's containerd.
	Images []string
}

// Cluster is a two-node Kubernetes cluster of local processes: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, and per node
// a Node (containerd and a kubelet) whose pods get addresses on a bridge
// from the CNI plugins, and kube-proxy (iptables mode).
type Cluster struct {
	opts ClusterOptions
	// Kubeconfig is an admin kubeconfig (system:masters).
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	// Nodes are the cluster's nodes by name: "node", in the cluster's
	// network namespace with the control plane, and "node2", in one of its
	// own.
	Nodes map[string]*Node
	procs []*process
	// off is set while node2 is powered off (PowerOff).
	off bool
	// apiserverArgs is kube-apiserver's command line; restarts counts
	// RestartAPIServer's.
	apiserverArgs []string
	restarts      int
}

// Node pod CIDRs: each node's bridge hands out addresses from its own.
const (
	nodePodCIDR  = "10.244.0.0/24"
	node2PodCIDR = "10.244.1.0/24"
)

// StartCluster starts the control plane, the node and kube-proxy, and
// returns once the node is Ready. On error everything started is stopped.
func StartCluster(ctx context.Context, o ClusterOptions) (c *Cluster, err error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"} {
		if _, err := os.Stat(filepath.Join(o.Bin, b)); err != nil {
			missing = append(missing, b)
		}
	}
	for _, t := range ClusterTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if _, err := os.Stat(filepath.Join(CNIBinDir, "bridge")); err != nil {
		missing = append(missing, "the CNI plugins (containernetworking-plugins)")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s: run hack/node-tools.sh cluster (as root)", strings.Join(missing, ", "))
	}
	c = &Cluster{opts: o}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	pki := filepath.Join(dir, "pki")
	for _, d := range []string{"pki", "etcd", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return c, err
		}
	}
	if err := writePKI(pki); err != nil {
		return c, err
	}
	c.Kubeconfig = filepath.Join(pki, "admin.kubeconfig")
	p := func(name string) string { return filepath.Join(pki, name) }
	kc := c.Kubeconfig
	logs := filepath.Join(dir, "logs")
	bin := func(name string) string { return filepath.Join(o.Bin, name) }

	etcd, err := startProcess(filepath.Join(logs, "etcd.log"), "etcd", bin("etcd"),
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--unsafe-no-fsync")
	if err != nil {
		return c, err
	}
	c.procs = append(c.procs, etcd)
	c.apiserverArgs = []string{bin("kube-apiserver"),
		"--etcd-servers", "http://127.0.0.1:2379",
		"--bind-address", "0.0.0.0", "--secure-port", fmt.Sprint(apiserverPort),
		"--advertise-address", ClusterNodeIP,
		"--service-cluster-ip-range", ClusterServiceCIDR,
		"--tls-cert-file", p("apiserver.crt"), "--tls-private-key-file", p("apiserver.key"),
		"--client-ca-file", p("ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p("sa.key"), "--service-account-signing-key-file", p("sa.key"),
		"--authorization-mode", "RBAC",
		"--profiling=false"}
	apiserver, err := startProcess(filepath.Join(logs, "kube-apiserver.log"), "kube-apiserver", c.apiserverArgs...)
	if err != nil {
		return c, err
	}
	c.procs = append(c.procs, apiserver)
	if c.Config, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
		return c, err
	}
	// Tests create pods at tens a second: client-go's default of 5 a
	// second would throttle them, not the cluster.
	c.Config.QPS, c.Config.Burst = 500, 1000
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return c, err
	}
	if err := c.waitAPI(ctx, apiserver); err != nil {
		return c, err
	}
	for _, d := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
			"--service-account-private-key-file", p("sa.key"), "--root-ca-file", p("ca.crt"),
			"--use-service-account-credentials=false", "--leader-elect=false",
			"--bind-address", "127.0.0.1", "--secure-port", "10257"}},
		{"kube-scheduler", []string{
			"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
			"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "10259"}},
	} {
		proc, err := startProcess(filepath.Join(logs, d.name+".log"), d.name, append([]string{bin(d.name)}, d.args...)...)
		if err != nil {
			return c, err
		}
		c.procs = append(c.procs, proc)
	}

	c.Nodes = map[string]*Node{}
	for _, n := range []struct {
		name, ip, podCIDR, netns string
		mirrors                  map[string]string
	}{
		{"node", ClusterNodeIP, nodePodCIDR, "", nil},
		// 127.0.0.1 is node2's own loopback: its pulls of the
		// registry there go to the cluster's side of its link.
		{"node2", ClusterNode2IP, node2PodCIDR, "node2", map[string]string{"127.0.0.1:5000": "http://" + clusterLinkIP + ":5000"}},
	} {
		node, err := StartNode(ctx, NodeOptions{
			Name:            n.name,
			Dir:             filepath.Join(dir, n.name),
			Kubelet:         bin("kubelet"),
			Busybox:         o.Busybox,
			Kubeconfig:      kc,
			NodeIP:          n.ip,
			CNIConfList:     cniConfList(n.podCIDR),
			CNIBinDir:       CNIBinDir,
			Images:          o.Images,
			NetNS:           n.netns,
			RegistryMirrors: n.mirrors,
		})
		if node != nil {
			c.Nodes[n.name] = node
		}
		if err != nil {
			return c, err
		}
		proxyCfg := filepath.Join(dir, "kube-proxy-"+n.name+".yaml")
		if err := os.WriteFile(proxyCfg, []byte(fmt.Sprintf(kubeProxyConfig, kc, n.name)), 0o644); err != nil {
			return c, err
		}
		proxy, err := startProcess(filepath.Join(logs, "kube-proxy-"+n.name+".log"), "kube-proxy", node.inNetNS(bin("kube-proxy"), "--config", proxyCfg)...)
		if err != nil {
			return c, err
		}
		c.procs = append(c.procs, proxy)
	}
	for name := range c.Nodes {
		if err := WaitNode(ctx, c.Client, name); err != nil {
			return c, err
		}
	}
	return c, nil
}

// cniConfList is a node's pod network: a bridge with the pods' gateway on
// the node, addresses from the node's podCIDR, and masquerading for what
// leaves it.
func cniConfList(podCIDR string) string {
	return `{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + podCIDR + `"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`
}

// kubeProxyConfig routes Services with iptables in the cluster's network
// namespace. The conntrack settings are zero: kube-proxy leaves the
// machine-wide nf_conntrack_max and the timeouts as they are.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
clusterCIDR: ` + ClusterPodCIDR + `
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// RestartAPIServer stops kube-apiserver (SIGTERM, and SIGKILL after 30 s)
// and starts it again with its flags and extra ones after them (a later flag
// wins), in the log file kube-apiserver-N.log for the Nth restart, and
// waits until it is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context, extra ...string) error {
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.name == "kube-apiserver" })
	if i < 0 {
		return errors.New("no kube-apiserver")
	}
	// One that does not finish its graceful shutdown in time is killed, as
	// a crashed one would be; either way it is gone.
	_ = c.procs[i].stop(30 * time.Second)
	c.apiserverArgs = append(c.apiserverArgs, extra...)
	c.restarts++
	p, err := startProcess(c.Log(fmt.Sprintf("kube-apiserver-%d", c.restarts)), "kube-apiserver", c.apiserverArgs...)
	if err != nil {
		return err
	}
	c.procs[i] = p
	return c.waitAPI(ctx, p)
}

func (c *Cluster) waitAPI(ctx context.Context, apiserver *process) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if apiserver.exited() {
			return fmt.Errorf("kube-apiserver exited; see %s", c.Log("kube-apiserver"))
		}
		if _, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver is not ready; see %s", c.Log("kube-apiserver"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Log returns the log file of one of the cluster's daemons.
func (c *Cluster) Log(name string) string {
	return filepath.Join(c.opts.Dir, "logs", name+".log")
}

// Stop stops the kube-proxies, the nodes, then the control plane, and removes the
// cluster's state (its logs stay). Stopping twice is fine.
func (c *Cluster) Stop() error {
	var errs []error
	if c.off {
		errs = append(errs, c.PowerOn())
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		if c.procs[i].name == "kube-proxy" {
			errs = append(errs, c.procs[i].stop(10*time.Second))
		}
	}
	for _, n := range c.Nodes {
		errs = append(errs, n.Stop())
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].stop(30*time.Second))
	}
	c.procs = nil
	for _, d := range []string{"etcd", "pki", "kube-proxy-node.yaml", "kube-proxy-node2.yaml"} {
		errs = append(errs, os.RemoveAll(filepath.Join(c.opts.Dir, d)))
	}
	return errors.Join(errs...)
}

// Leftovers lists what a stopped cluster left: the node's leftovers and
// processes that name the cluster's directory.
func (c *Cluster) Leftovers() ([]string, error) {
	var out []string
	for _, n := range c.Nodes {
		l, err := n.Leftovers()
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	pids, err := findProcesses(func(_ int, cmdline string) bool { return strings.Contains(cmdline, c.opts.Dir) })
	for _, pid := range pids {
		out = append(out, fmt.Sprintf("process %d", pid))
	}
	return out, err
}

// writePKI writes the cluster's CA, the apiserver's serving certificate
// (for its node address, its Service's cluster IP and names), an admin
// client certificate in admin.kubeconfig, and the service-account signing
// key. ECDSA P-256 throughout.
func writePKI(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster-e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		return err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return err
	}
	issue := func(serial int64, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = big.NewInt(serial), ca.NotBefore, ca.NotAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
	}
	serviceIP, _, _ := net.ParseCIDR(ClusterServiceCIDR)
	serviceIP = serviceIP.To4()
	serviceIP[3]++
	srvCert, srvKey, err := issue(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP(ClusterNodeIP), serviceIP, net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
	})
	if err != nil {
		return err
	}
	adminCert, adminKey, err := issue(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "cluster-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, b := range map[string][]byte{
		"ca.crt": caPEM, "apiserver.crt": srvCert, "apiserver.key": srvKey,
		"sa.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://%s:%d", ClusterNodeIP, apiserverPort), CertificateAuthorityData: caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: adminCert, ClientKeyData: adminKey}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "admin"}
	cfg.CurrentContext = "admin"
	return clientcmd.WriteToFile(*cfg, filepath.Join(dir, "admin.kubeconfig"))
}

// WaitNode waits until the node named name is Ready.
func WaitNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var last string
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = "not Ready"
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					if c.Status == corev1.ConditionTrue {
						return nil
					}
					last = fmt.Sprintf("Ready=%s: %s", c.Status, c.Message)
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: %s", name, last)
		case <-time.After(time.Second):
		}
	}
}

// linkRules are the iptables rules, in the cluster's network namespace,
// that drop everything on node2's link both ways: to the control plane,
// node2's address and its pods' addresses are then a black hole, as a node
// that lost power is behind a switch (a connection attempt times out; no
// error comes back).
var linkRules = [][]string{
	{"INPUT", "-i", "node2-link", "-j", "DROP"},
	{"OUTPUT", "-o", "node2-link", "-j", "DROP"},
	{"FORWARD", "-i", "node2-link", "-j", "DROP"},
	{"FORWARD", "-o", "node2-link", "-j", "DROP"},
}

// PowerOff makes node2 look to the rest of the cluster like a node that
// lost its power: every process of the node (containerd, its shims, the
// kubelet, its kube-proxy) stopped with SIGSTOP, its pods' cgroups frozen,
// and its link dropped both ways. PowerOn undoes it, as the node coming
// back: its kubelet reports again and its pods go on.
func (c *Cluster) PowerOff() error {
	c.off = true
	if err := c.node2Processes(syscall.SIGSTOP); err != nil {
		return err
	}
	if err := os.WriteFile(c.Nodes["node2"].Cgroup("freezer", "freezer.state"), []byte("FROZEN"), 0o644); err != nil {
		return fmt.Errorf("freezing node2's pods: %w", err)
	}
	for _, r := range linkRules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, r...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables -I %s: %w\n%s", strings.Join(r, " "), err, out)
		}
	}
	return nil
}

// PowerOn brings node2 back from PowerOff.
func (c *Cluster) PowerOn() error {
	c.off = false
	var errs []error
	for _, r := range linkRules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("iptables -D %s: %w\n%s", strings.Join(r, " "), err, out))
		}
	}
	if err := os.WriteFile(c.Nodes["node2"].Cgroup("freezer", "freezer.state"), []byte("THAWED"), 0o644); err != nil {
		errs = append(errs, fmt.Errorf("thawing node2's pods: %w", err))
	}
	return errors.Join(append(errs, c.node2Processes(syscall.SIGCONT))...)
}

// node2Processes sends sig to every process of node2: those that name its
// directory (containerd, the shims, the kubelet) and its kube-proxy.
func (c *Cluster) node2Processes(sig syscall.Signal) error {
	dir := c.Nodes["node2"].opts.Dir
	pids, err := findProcesses(func(_ int, cmdline string) bool {
		return strings.Contains(cmdline, dir+"/") || strings.Contains(cmdline, "kube-proxy-node2.yaml")
	})
	if err != nil {
		return err
	}
	if len(pids) < 3 {
		return fmt.Errorf("%d processes of node2 found, want containerd, the kubelet and kube-proxy at least", len(pids))
	}
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("signal %v to %d: %w", sig, pid, err))
		}
	}
	return errors.Join(errs...)
}
