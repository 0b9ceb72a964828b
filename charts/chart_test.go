package charts

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
)

const fullname = "sandbox-webhook"

// failPrefix is what Helm puts before a template's fail message.
var failPrefix = regexp.MustCompile(`^execution error at \([^)]*\): `)

func TestDefaultRenderGolden(t *testing.T) {
	r := mustRender(t, "")
	checkGolden(t, "default.golden.yaml", r.manifest)
}

func TestDefaultObjects(t *testing.T) {
	r := mustRender(t, "")

	want := []string{
		"ServiceAccount/sandbox-webhook",
		"ConfigMap/sandbox-webhook-config",
		"ConfigMap/sandbox-webhook-policies",
		"ClusterRole/sandbox-webhook",
		"ClusterRoleBinding/sandbox-webhook",
		"Role/sandbox-webhook",
		"RoleBinding/sandbox-webhook",
		"Service/sandbox-webhook",
		"Deployment/sandbox-webhook",
		"MutatingWebhookConfiguration/sandbox-webhook",
		"Certificate/sandbox-webhook",
		"Issuer/sandbox-webhook",
		"PodDisruptionBudget/sandbox-webhook",
		"NetworkPolicy/sandbox-webhook",
		"ValidatingAdmissionPolicy/sandbox-webhook-guard",
		"ValidatingAdmissionPolicyBinding/sandbox-webhook-guard",
		"MutatingAdmissionPolicy/sandbox-webhook-unmark",
		"MutatingAdmissionPolicyBinding/sandbox-webhook-unmark",
	}
	if got := kinds(r); !sameSet(got, want) {
		t.Errorf("rendered objects:\n got %v\nwant %v", got, want)
	}

	d := one[*appsv1.Deployment](t, r)
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
	}
	if got := d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue(); got != 0 {
		t.Errorf("rolling update maxUnavailable = %d, want 0 (never fewer ready replicas)", got)
	}
	pod := d.Spec.Template
	if !selects(d.Spec.Selector, pod.Labels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", d.Spec.Selector, pod.Labels)
	}
	for k := range pod.Annotations {
		if strings.Contains(k, "checksum") {
			t.Errorf("pod template annotation %q would restart the pods on a policy change; policies are hot-reloaded", k)
		}
	}
	if pod.Spec.PriorityClassName != "" {
		t.Errorf("priorityClassName = %q by default, want none", pod.Spec.PriorityClassName)
	}
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext not hardened: %+v", psc)
	}
	// Replicas on separate nodes whenever another node can take one (hard,
	// tainted nodes not counted), and preferably in separate zones.
	if len(pod.Spec.TopologySpreadConstraints) != 2 {
		t.Fatalf("topologySpreadConstraints = %v, want one over nodes and one over zones", pod.Spec.TopologySpreadConstraints)
	}
	tsc := pod.Spec.TopologySpreadConstraints[0]
	if tsc.TopologyKey != "kubernetes.io/hostname" || tsc.MaxSkew != 1 || !selects(tsc.LabelSelector, pod.Labels) ||
		tsc.WhenUnsatisfiable != corev1.DoNotSchedule || tsc.NodeTaintsPolicy == nil || *tsc.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor {
		t.Errorf("topology spread %+v does not keep these pods on separate nodes", tsc)
	}
	if z := pod.Spec.TopologySpreadConstraints[1]; z.TopologyKey != "topology.kubernetes.io/zone" || z.WhenUnsatisfiable != corev1.ScheduleAnyway || !selects(z.LabelSelector, pod.Labels) {
		t.Errorf("zone spread %+v", z)
	}

	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if c.Image != "ghcr.io/sandbox-webhook/sandbox-webhook:"+loadChart(t).Metadata.AppVersion {
		t.Errorf("image = %q, want the appVersion tag", c.Image)
	}
	wantArgs := []string{
		"serve",
		"--policy=/etc/sandbox-webhook/policies",
		"--leak-mitigation-file=/etc/sandbox-webhook/config/leak-mitigation",
		"--cert-dir=/etc/sandbox-webhook/tls",
		"--port=9443",
		"--metrics-bind-address=:8080",
		"--health-probe-bind-address=:8081",
		"--log-level=info",
		"--tls-min-version=1.3",
		"--shutdown-delay=5s",
		"--idle-drain=95s",
		"--exclude-namespace=kube-system",
		"--exclude-namespace=" + namespace,
		"--status-always=true",
		"--cert-mode=cert-manager",
		"--certificate=" + fullname,
		"--webhook-config=" + fullname,
	}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args:\n got %q\nwant %q", c.Args, wantArgs)
	}
	if len(c.Command) != 0 {
		t.Errorf("command = %q; the image's entrypoint must run", c.Command)
	}
	if len(c.Env) != 3 || c.Env[0].Name != "POD_NAMESPACE" || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" ||
		c.Env[1].Name != "GOMEMLIMIT" || c.Env[1].Value != "230MiB" || c.Env[2].Name != "GOGC" || c.Env[2].Value != "200" {
		t.Errorf("env = %+v, want POD_NAMESPACE from the downward API, GOMEMLIMIT 230MiB (nine tenths of 256Mi) and GOGC 200", c.Env)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["webhook"] != 9443 || ports["metrics"] != 8080 || ports["health"] != 8081 {
		t.Errorf("container ports = %v", ports)
	}
	checkProbe(t, "readiness", c.ReadinessProbe, "/readyz")
	checkProbe(t, "liveness", c.LivenessProbe, "/healthz")
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext not hardened: %+v", sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want cpu/memory requests and a memory limit", c.Resources)
	}
	if c.Lifecycle != nil {
		t.Errorf("lifecycle = %+v; the server delays its own shutdown (--shutdown-delay)", c.Lifecycle)
	}
	// The kubelet must not kill the server before its shutdown delay and the drain of
	// requests bounded by the webhook timeout are over.
	if grace := *pod.Spec.TerminationGracePeriodSeconds; grace < 5+5+5 {
		t.Errorf("terminationGracePeriodSeconds = %d < shutdown delay 5s + webhook timeout 5s + 5s", grace)
	}

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for name, path := range map[string]string{
		"policies": "/etc/sandbox-webhook/policies",
		"config":   "/etc/sandbox-webhook/config",
		"tls":      "/etc/sandbox-webhook/tls",
	} {
		if m, ok := mounts[name]; !ok || m.MountPath != path || !m.ReadOnly || m.SubPath != "" {
			t.Errorf("mount %s = %+v, want read-only %s without subPath (subPath mounts never see ConfigMap updates)", name, m, path)
		}
	}
	if v := volumes["policies"].ConfigMap; v == nil || v.Name != fullname+"-policies" || len(v.Items) != 0 {
		t.Errorf("policies volume = %+v, want the whole %s-policies ConfigMap", volumes["policies"], fullname)
	}
	if v := volumes["config"].ConfigMap; v == nil || v.Name != fullname+"-config" {
		t.Errorf("config volume = %+v", volumes["config"])
	}
	if v := volumes["tls"].Secret; v == nil || v.SecretName != fullname+"-tls" {
		t.Errorf("tls volume = %+v, want the Certificate's Secret", volumes["tls"])
	}
	// tls.key is readable by the server's group only: 0440 with fsGroup, whose
	// group the kubelet gives the files (0400 would leave them root's).
	if v := volumes["tls"].Secret; v == nil || v.DefaultMode == nil || *v.DefaultMode != 0o440 {
		t.Errorf("tls volume = %+v, want defaultMode 0440 (the default 0644 lets every user in the container read tls.key)", volumes["tls"])
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.FSGroup == nil || sc.RunAsGroup == nil || *sc.FSGroup != *sc.RunAsGroup {
		t.Errorf("pod securityContext = %+v, want fsGroup equal to runAsGroup so the server can read its 0440 key", sc)
	}

	sa := one[*corev1.ServiceAccount](t, r)
	if pod.Spec.ServiceAccountName != sa.Name {
		t.Errorf("serviceAccountName = %q, want %q", pod.Spec.ServiceAccountName, sa.Name)
	}

	svc := one[*corev1.Service](t, r)
	if !selects(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, pod.Labels) {
		t.Errorf("Service selector %v does not select the pods", svc.Spec.Selector)
	}
	svcPorts := map[string]corev1.ServicePort{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = p
	}
	if p := svcPorts["https"]; p.Port != 443 || p.TargetPort != intstr.FromString("webhook") {
		t.Errorf("Service https port = %+v", p)
	}
	if p := svcPorts["metrics"]; p.TargetPort != intstr.FromString("metrics") {
		t.Errorf("Service metrics port = %+v", p)
	}

	pdb := one[*policyv1.PodDisruptionBudget](t, r)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PDB = %+v, want minAvailable 1", pdb.Spec)
	}
	if !selects(pdb.Spec.Selector, pod.Labels) {
		t.Errorf("PDB selector does not select the pods")
	}

	cms := configMaps(r)
	if got := cms[fullname+"-config"].Data; len(got) != 1 || got["leak-mitigation"] != "policy" {
		t.Errorf("config ConfigMap data = %v, want leak-mitigation: policy", got)
	}
	if got := cms[fullname+"-policies"].Data; len(got) != 1 || !strings.Contains(got["sandbox-seed.yaml"], "kind: SandboxPolicy") {
		t.Errorf("policies ConfigMap data = %v, want sandbox-seed.yaml", got)
	}

	mwc := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r)
	if got := mwc.Annotations["cert-manager.io/inject-ca-from"]; got != namespace+"/"+fullname {
		t.Errorf("inject-ca-from = %q", got)
	}
	if len(mwc.Webhooks) != 3 {
		t.Fatalf("want three webhooks (pods and its retry with the guard, ephemeral containers), got %d", len(mwc.Webhooks))
	}
	wh := mwc.Webhooks[0]
	// failurePolicy Fail with webhook.guard: each pods entry fails open and
	// the guard refuses what neither answered (TestGuard).
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy = %v, want Ignore under the guard", wh.FailurePolicy)
	}
	if wh.SideEffects == nil || *wh.SideEffects != admissionregistrationv1.SideEffectClassNone {
		t.Errorf("sideEffects = %v", wh.SideEffects)
	}
	if !slices.Equal(wh.AdmissionReviewVersions, []string{"v1"}) {
		t.Errorf("admissionReviewVersions = %v", wh.AdmissionReviewVersions)
	}
	if wh.ReinvocationPolicy == nil || *wh.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
		t.Errorf("reinvocationPolicy = %v", wh.ReinvocationPolicy)
	}
	if wh.TimeoutSeconds == nil || *wh.TimeoutSeconds != 5 {
		t.Errorf("timeoutSeconds = %v, want 5", wh.TimeoutSeconds)
	}
	wantRules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
			Scope: ptr(admissionregistrationv1.NamespacedScope),
		},
	}}
	if !equalJSON(t, wh.Rules, wantRules) {
		t.Errorf("rules = %+v", wh.Rules)
	}
	s := wh.ClientConfig.Service
	if s == nil || s.Name != svc.Name || s.Namespace != namespace || s.Path == nil || *s.Path != "/mutate-v1-pod" ||
		s.Port == nil || *s.Port != 443 || wh.ClientConfig.URL != nil {
		t.Errorf("clientConfig = %+v, want the Service at /mutate-v1-pod", wh.ClientConfig)
	}
	if len(wh.ClientConfig.CABundle) != 0 {
		t.Errorf("caBundle is set; cainjector owns it in certManager mode")
	}
	wantNS := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn,
		Values: []string{"kube-system", namespace},
	}}}
	if !equalJSON(t, wh.NamespaceSelector, wantNS) {
		t.Errorf("namespaceSelector = %+v", wh.NamespaceSelector)
	}
	if !equalJSON(t, wh.ObjectSelector, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}}) {
		t.Errorf("objectSelector = %+v", wh.ObjectSelector)
	}
	if len(wh.MatchConditions) != 0 {
		t.Errorf("matchConditions = %v by default", wh.MatchConditions)
	}
	// The webhook's own pods must never be sent to it.
	if selects(wh.ObjectSelector, pod.Labels) {
		t.Errorf("the objectSelector selects the webhook's own pods")
	}

	// Ephemeral containers are judged for their hostPath mounts, whatever
	// the pod's labels (whoever adds one may remove them first), in the
	// same namespaces, only for pods with a hostPath volume.
	eph := mwc.Webhooks[2]
	if eph.Name != "ephemeralcontainers.sandbox-webhook.io" {
		t.Errorf("third webhook = %s", eph.Name)
	}
	wantEphRules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/ephemeralcontainers"},
			Scope: ptr(admissionregistrationv1.NamespacedScope),
		},
	}}
	if !equalJSON(t, eph.Rules, wantEphRules) {
		t.Errorf("ephemeral-container rules = %+v", eph.Rules)
	}
	if eph.ObjectSelector != nil && (len(eph.ObjectSelector.MatchLabels) > 0 || len(eph.ObjectSelector.MatchExpressions) > 0) {
		t.Errorf("ephemeral-container objectSelector = %+v, want none", eph.ObjectSelector)
	}
	if !equalJSON(t, eph.NamespaceSelector, wantNS) {
		t.Errorf("ephemeral-container namespaceSelector = %+v", eph.NamespaceSelector)
	}
	if !equalJSON(t, eph.ClientConfig, wh.ClientConfig) || !equalJSON(t, eph.TimeoutSeconds, wh.TimeoutSeconds) || !equalJSON(t, eph.SideEffects, wh.SideEffects) {
		t.Errorf("the ephemeral-container webhook is called differently from the pod webhook: %+v", eph)
	}
	// The guard covers pod creation only: an ephemeral container no replica
	// judged is refused.
	if eph.FailurePolicy == nil || *eph.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("ephemeral-container failurePolicy = %v, want Fail", eph.FailurePolicy)
	}
	if eph.ReinvocationPolicy == nil || *eph.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
		t.Errorf("ephemeral-container reinvocationPolicy = %v, want Never", eph.ReinvocationPolicy)
	}
	if len(eph.MatchConditions) != 1 || eph.MatchConditions[0].Expression != "has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.hostPath))" {
		t.Errorf("ephemeral-container matchConditions = %+v, want the hostPath pre-filter", eph.MatchConditions)
	}

	// Ingress to the webhook pods: the webhook port from anywhere (the API
	// server's address depends on the cluster), metrics from Prometheus
	// servers only, nothing else.
	np := one[*networkingv1.NetworkPolicy](t, r)
	if !selects(&np.Spec.PodSelector, pod.Labels) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy selects %v for %v, want the webhook pods' ingress", np.Spec.PodSelector, np.Spec.PolicyTypes)
	}
	tcp := corev1.ProtocolTCP
	wantIngress := []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromString("webhook")), Protocol: &tcp}},
	}, {
		Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromString("metrics")), Protocol: &tcp}},
		From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
		}},
	}}
	if !equalJSON(t, np.Spec.Ingress, wantIngress) {
		t.Errorf("NetworkPolicy ingress = %+v", np.Spec.Ingress)
	}

	cert := one[*cmv1.Certificate](t, r)
	wantDNS := []string{fullname + "." + namespace + ".svc", fullname + "." + namespace + ".svc.cluster.local"}
	if !slices.Equal(cert.Spec.DNSNames, wantDNS) {
		t.Errorf("Certificate dnsNames = %v, want %v", cert.Spec.DNSNames, wantDNS)
	}
	if cert.Spec.SecretName != fullname+"-tls" {
		t.Errorf("Certificate secretName = %q", cert.Spec.SecretName)
	}
	if cert.Spec.PrivateKey == nil || cert.Spec.PrivateKey.RotationPolicy != cmv1.RotationPolicyAlways {
		t.Errorf("privateKey = %+v, want rotationPolicy Always", cert.Spec.PrivateKey)
	}
	issuer := one[*cmv1.Issuer](t, r)
	if issuer.Spec.SelfSigned == nil {
		t.Errorf("Issuer is not selfSigned: %+v", issuer.Spec)
	}
	if ref := cert.Spec.IssuerRef; ref.Name != issuer.Name || ref.Kind != "Issuer" || ref.Group != "cert-manager.io" {
		t.Errorf("issuerRef = %+v, want the chart's Issuer", ref)
	}

	checkRBAC(t, r, &certs.Options{Mode: certs.ModeCertManager, Namespace: namespace,
		Certificate: fullname, WebhookConfig: fullname})
	checkBindings(t, r, sa)

	if strings.Contains(r.notes, "WARNING") {
		t.Errorf("NOTES warn with the default values:\n%s", r.notes)
	}
	for _, want := range []string{"app: sandbox", "leak-mitigation", "MutatingWebhookConfiguration  " + fullname} {
		if !strings.Contains(r.notes, want) {
			t.Errorf("NOTES do not mention %q:\n%s", want, r.notes)
		}
	}
}

func TestValueVariants(t *testing.T) {
	tests := []struct {
		name   string
		values string
		check  func(t *testing.T, r *rendered)
	}{{
		name: "certManager with a user issuer",
		values: `
certificates:
  certManager:
    issuerRef: {name: corp-ca, kind: ClusterIssuer}`,
		check: func(t *testing.T, r *rendered) {
			if n := len(all[*cmv1.Issuer](r)); n != 0 {
				t.Errorf("%d Issuers rendered with a user issuerRef", n)
			}
			ref := one[*cmv1.Certificate](t, r).Spec.IssuerRef
			if ref.Name != "corp-ca" || ref.Kind != "ClusterIssuer" || ref.Group != "cert-manager.io" {
				t.Errorf("issuerRef = %+v", ref)
			}
		},
	}}
	// GOMEMLIMIT follows the memory limit: nine tenths of it, or none
	// when it is not written in units the chart reads. GOGC comes only
	// with it: without a limit to hold the heap, Go's default stays.
	for _, c := range []struct{ limit, gcPercent, memLimit, gogc string }{
		{"1Gi", "", "921MiB", "200"}, {"300Mi", "", "270MiB", "200"}, {"524288Ki", "", "460MiB", "200"},
		{"536870912", "", "460MiB", "200"}, {"0.5Gi", "", "", ""}, {"", "", "", ""},
		{"256Mi", "150", "230MiB", "150"}, {"256Mi", "null", "230MiB", ""},
	} {
		values := `resources: {limits: {memory: ` + c.limit + `}}`
		if c.limit == "" {
			values = `resources: {limits: null}`
		}
		if c.gcPercent != "" {
			values += "\nserver: {gcPercent: " + c.gcPercent + "}"
		}
		tests = append(tests, struct {
			name   string
			values string
			check  func(t *testing.T, r *rendered)
		}{"GOMEMLIMIT and GOGC for " + c.limit + " " + c.gcPercent, values, func(t *testing.T, r *rendered) {
			got := map[string]string{}
			for _, e := range one[*appsv1.Deployment](t, r).Spec.Template.Spec.Containers[0].Env {
				got[e.Name] = e.Value
			}
			if got["GOMEMLIMIT"] != c.memLimit || got["GOGC"] != c.gogc {
				t.Errorf("GOMEMLIMIT, GOGC = %q, %q; want %q, %q", got["GOMEMLIMIT"], got["GOGC"], c.memLimit, c.gogc)
			}
		}})
	}
	tests = append(tests, []struct {
		name   string
		values string
		check  func(t *testing.T, r *rendered)
	}{{
		name:   "mirrorEphemeralContainers",
		values: `webhook: {mirrorEphemeralContainers: true}`,
		check: func(t *testing.T, r *rendered) {
			mwc := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r)
			eph := mwc.Webhooks[len(mwc.Webhooks)-1]
			if eph.Name != "ephemeralcontainers.sandbox-webhook.io" || len(eph.MatchConditions) != 0 {
				t.Errorf("%s has matchConditions %+v, want none: every update of the selected namespaces is sent", eph.Name, eph.MatchConditions)
			}
		},
	}, {
		name:   "selfManaged",
		values: `certificates: {mode: selfManaged}`,
		check: func(t *testing.T, r *rendered) {
			if n := len(all[*cmv1.Certificate](r)) + len(all[*cmv1.Issuer](r)); n != 0 {
				t.Errorf("%d cert-manager objects rendered in selfManaged mode", n)
			}
			mwc := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r)
			if _, ok := mwc.Annotations["cert-manager.io/inject-ca-from"]; ok {
				t.Errorf("inject-ca-from set in selfManaged mode")
			}
			if len(mwc.Webhooks[0].ClientConfig.CABundle) != 0 {
				t.Errorf("caBundle rendered; the server owns it")
			}
			sec := one[*corev1.Secret](t, r)
			if sec.Name != fullname+"-tls" || len(sec.Data) != 0 || len(sec.StringData) != 0 {
				t.Errorf("Secret %s has data %v; the chart renders it empty for the server to fill", sec.Name, sec.Data)
			}
			c := deploymentContainer(t, r)
			wantArgs := []string{"--cert-mode=self-managed", "--cert-secret=" + fullname + "-tls",
				"--webhook-config=" + fullname, "--service-name=" + fullname}
			if !hasSuffix(c.Args, wantArgs) {
				t.Errorf("args %q do not end with %q", c.Args, wantArgs)
			}
			tls := volume(t, r, "tls")
			if tls.EmptyDir == nil {
				t.Errorf("tls volume = %+v, want a writable emptyDir for the server's files", tls)
			}
			if m := mount(t, c, "tls"); m.ReadOnly {
				t.Errorf("tls mount is read-only; the server writes its certificate there")
			}
			checkRBAC(t, r, &certs.Options{Mode: certs.ModeSelfManaged, Namespace: namespace,
				Secret: fullname + "-tls", WebhookConfig: fullname, ServiceName: fullname})
			cr, role := one[*rbacv1.ClusterRole](t, r), one[*rbacv1.Role](t, r)
			for _, rule := range append(cr.Rules, role.Rules...) {
				if len(rule.NonResourceURLs) > 0 {
					continue // get /metrics, checked by checkRBAC; no object
				}
				if slices.Contains(rule.Verbs, "create") || slices.Contains(rule.Verbs, "get") || slices.Contains(rule.Verbs, "*") {
					t.Errorf("rule %+v grants create or get; the chart renders the Secret so the server needs neither", rule)
				}
			}
		},
	}, {
		name: "existingSecret",
		values: `
certificates: {mode: existingSecret, existingSecret: {secretName: my-tls}}
webhook: {caBundle: Q0EK}`,
		check: func(t *testing.T, r *rendered) {
			if n := len(all[*cmv1.Certificate](r)) + len(all[*cmv1.Issuer](r)) + len(all[*corev1.Secret](r)); n != 0 {
				t.Errorf("%d certificate objects rendered in existingSecret mode", n)
			}
			checkRBAC(t, r, &certs.Options{Mode: certs.ModeFiles, Namespace: namespace})
			wh := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r).Webhooks[0]
			if string(wh.ClientConfig.CABundle) != "CA\n" {
				t.Errorf("caBundle = %q, want the decoded webhook.caBundle", wh.ClientConfig.CABundle)
			}
			c := deploymentContainer(t, r)
			if !hasSuffix(c.Args, []string{"--cert-mode=files"}) {
				t.Errorf("args = %q", c.Args)
			}
			if v := volume(t, r, "tls"); v.Secret == nil || v.Secret.SecretName != "my-tls" {
				t.Errorf("tls volume = %+v", v)
			}
		},
	}, {
		name: "existing policies ConfigMap",
		values: `
policies: {inline: null, existingConfigMap: my-policies}`,
		check: func(t *testing.T, r *rendered) {
			cms := configMaps(r)
			if _, ok := cms[fullname+"-policies"]; ok {
				t.Errorf("the chart's policies ConfigMap is rendered with existingConfigMap")
			}
			if _, ok := cms[fullname+"-config"]; !ok {
				t.Errorf("the config ConfigMap (leak-mitigation) is missing")
			}
			if v := volume(t, r, "policies"); v.ConfigMap == nil || v.ConfigMap.Name != "my-policies" {
				t.Errorf("policies volume = %+v", v)
			}
			if !strings.Contains(r.notes, "ConfigMap my-policies") {
				t.Errorf("NOTES do not name the policies ConfigMap:\n%s", r.notes)
			}
		},
	}, {
		name: "inline policies replace the default",
		values: `
policies:
  inline:
    sandbox-seed.yaml: null
    10-disk.yaml: |
      apiVersion: sandbox-webhook.io/v1alpha1
      kind: SandboxPolicy
      metadata: {name: disk}
      spec: {mode: disk, match: {namespaces: [rl-*]}}`,
		check: func(t *testing.T, r *rendered) {
			data := configMaps(r)[fullname+"-policies"].Data
			if len(data) != 1 || !strings.Contains(data["10-disk.yaml"], "mode: disk") {
				t.Errorf("policies ConfigMap data = %v", data)
			}
		},
	}, {
		name: "url mode",
		values: `
webhook: {url: "https://127.0.0.1:9443/mutate-v1-pod", caBundle: Q0EK}
certificates: {mode: existingSecret, existingSecret: {secretName: my-tls}}`,
		check: func(t *testing.T, r *rendered) {
			cc := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r).Webhooks[0].ClientConfig
			if cc.URL == nil || *cc.URL != "https://127.0.0.1:9443/mutate-v1-pod" || cc.Service != nil {
				t.Errorf("clientConfig = %+v, want the url and no service", cc)
			}
			if string(cc.CABundle) != "CA\n" {
				t.Errorf("caBundle = %q", cc.CABundle)
			}
		},
	}, {
		name:   "url mode with selfManaged certificates needs no caBundle",
		values: `{webhook: {url: "https://127.0.0.1:9443/mutate-v1-pod"}, certificates: {mode: selfManaged}}`,
		check: func(t *testing.T, r *rendered) {
			cc := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r).Webhooks[0].ClientConfig
			if cc.URL == nil || cc.Service != nil || len(cc.CABundle) != 0 {
				t.Errorf("clientConfig = %+v", cc)
			}
		},
	}, {
		name:   "leakMitigation on",
		values: `leakMitigation: "on"`,
		check: func(t *testing.T, r *rendered) {
			if got := configMaps(r)[fullname+"-config"].Data["leak-mitigation"]; got != "on" {
				t.Errorf("leak-mitigation = %q, want on", got)
			}
			// Flipping the switch must not change the pod template (no restart).
			def := mustRender(t, "")
			if !equalJSON(t, one[*appsv1.Deployment](t, r).Spec, one[*appsv1.Deployment](t, def).Spec) {
				t.Errorf("the Deployment changed with leakMitigation; the switch must be hot-reloaded")
			}
		},
	}, {
		name:   "policy edits do not change the pod template",
		values: `policies: {inline: {sandbox-seed.yaml: "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicy\n"}}`,
		check: func(t *testing.T, r *rendered) {
			def := mustRender(t, "")
			if !equalJSON(t, one[*appsv1.Deployment](t, r).Spec, one[*appsv1.Deployment](t, def).Spec) {
				t.Errorf("the Deployment changed with a policy edit; policies are hot-reloaded")
			}
		},
	}, {
		name: "NetworkPolicy for the API server's addresses",
		values: `
networkPolicy:
  webhookFrom: [{ipBlock: {cidr: 10.0.0.0/24}}]
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]`,
		check: func(t *testing.T, r *rendered) {
			np := one[*networkingv1.NetworkPolicy](t, r)
			if len(np.Spec.Ingress) != 2 {
				t.Fatalf("NetworkPolicy ingress = %+v", np.Spec.Ingress)
			}
			if !equalJSON(t, np.Spec.Ingress[0].From, []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24"}}}) {
				t.Errorf("webhook port from %+v", np.Spec.Ingress[0].From)
			}
			if !equalJSON(t, np.Spec.Ingress[1].From, []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}) {
				t.Errorf("metrics port from %+v", np.Spec.Ingress[1].From)
			}
		},
	}, {
		name:   "NetworkPolicy off",
		values: `networkPolicy: {enabled: false}`,
		check: func(t *testing.T, r *rendered) {
			if n := len(all[*networkingv1.NetworkPolicy](r)); n != 0 {
				t.Errorf("%d NetworkPolicies rendered with networkPolicy.enabled=false", n)
			}
		},
	}, {
		name:   "empty objectSelector when explicitly allowed",
		values: `webhook: {objectSelector: {matchLabels: null}, allowEmptyObjectSelector: true}`,
		check: func(t *testing.T, r *rendered) {
			wh := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r).Webhooks[0]
			if !equalJSON(t, wh.ObjectSelector, &metav1.LabelSelector{}) {
				t.Errorf("objectSelector = %+v, want the empty selector", wh.ObjectSelector)
			}
		},
	}, {
		name: "selectors, matchConditions and excluded namespaces",
		values: `
webhook:
  failurePolicy: Ignore
  timeoutSeconds: 3
  namespaceSelector:
    matchLabels: {sandboxes: enabled}
    matchExpressions: [{key: tier, operator: NotIn, values: [prod]}]
  excludeNamespaces: [monitoring, kube-system]
  objectSelector:
    matchLabels: null # values files merge maps: drop the default app=sandbox
    matchExpressions: [{key: agents.x-k8s.io/sandbox-name-hash, operator: Exists}]
  matchConditions:
    - {name: not-dry-run, expression: "!request.dryRun"}`,
		check: func(t *testing.T, r *rendered) {
			wh := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r).Webhooks[0]
			if *wh.FailurePolicy != admissionregistrationv1.Ignore || *wh.TimeoutSeconds != 3 {
				t.Errorf("failurePolicy %v timeout %v", *wh.FailurePolicy, *wh.TimeoutSeconds)
			}
			wantNS := &metav1.LabelSelector{
				MatchLabels: map[string]string{"sandboxes": "enabled"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}},
					{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn,
						Values: []string{"kube-system", namespace, "monitoring"}},
				},
			}
			if !equalJSON(t, wh.NamespaceSelector, wantNS) {
				t.Errorf("namespaceSelector = %+v", wh.NamespaceSelector)
			}
			wantObj := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "agents.x-k8s.io/sandbox-name-hash", Operator: metav1.LabelSelectorOpExists}}}
			if !equalJSON(t, wh.ObjectSelector, wantObj) {
				t.Errorf("objectSelector = %+v", wh.ObjectSelector)
			}
			wantMC := []admissionregistrationv1.MatchCondition{{Name: "not-dry-run", Expression: "!request.dryRun"}}
			if !equalJSON(t, wh.MatchConditions, wantMC) {
				t.Errorf("matchConditions = %+v", wh.MatchConditions)
			}
			c := deploymentContainer(t, r)
			for _, ns := range []string{"kube-system", namespace, "monitoring"} {
				if !slices.Contains(c.Args, "--exclude-namespace="+ns) {
					t.Errorf("args %q do not exclude %s", c.Args, ns)
				}
			}
			if !strings.Contains(r.notes, "WARNING: webhook.failurePolicy is Ignore") {
				t.Errorf("NOTES do not warn about Ignore:\n%s", r.notes)
			}
			if !strings.Contains(r.notes, "kubectl label namespace NAMESPACE sandboxes=enabled") {
				t.Errorf("NOTES do not say how to opt a namespace in:\n%s", r.notes)
			}
		},
	}, {
		name: "one replica without PDB, priority class, digest, ServiceMonitor",
		values: `
replicaCount: 1
podDisruptionBudget: {enabled: false}
priorityClassName: system-cluster-critical
image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
serviceMonitor: {enabled: true, labels: {release: prom}}`,
		check: func(t *testing.T, r *rendered) {
			if n := len(all[*policyv1.PodDisruptionBudget](r)); n != 0 {
				t.Errorf("PDB rendered while disabled")
			}
			d := one[*appsv1.Deployment](t, r)
			if *d.Spec.Replicas != 1 || d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
				t.Errorf("replicas %d priorityClassName %q", *d.Spec.Replicas, d.Spec.Template.Spec.PriorityClassName)
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") {
				t.Errorf("image = %q, want the digest", img)
			}
			sm := one[*unstructured.Unstructured](t, r)
			if sm.GetKind() != "ServiceMonitor" || sm.GetLabels()["release"] != "prom" {
				t.Errorf("ServiceMonitor = %v", sm.Object)
			}
			port, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(port) != 1 || port[0].(map[string]any)["port"] != "metrics" {
				t.Errorf("ServiceMonitor endpoints = %v", port)
			}
			for _, w := range []string{"WARNING: replicaCount is 1", "WARNING: podDisruptionBudget.enabled is false"} {
				if !strings.Contains(r.notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, r.notes)
				}
			}
		},
	}, {
		name: "PrometheusRule and Grafana dashboard",
		values: `
webhook: {timeoutSeconds: 10}
prometheusRule: {enabled: true, labels: {release: prom}, alertLabels: {team: sandbox}, certificateExpiryDays: 3}
grafanaDashboard: {enabled: true, sidecarLabel: dashboards, sidecarLabelValue: sandbox, namespace: monitoring, annotations: {grafana_folder: Sandboxes}}`,
		check: func(t *testing.T, r *rendered) {
			pr := one[*unstructured.Unstructured](t, r)
			if pr.GetKind() != "PrometheusRule" || pr.GetAPIVersion() != "monitoring.coreos.com/v1" || pr.GetLabels()["release"] != "prom" {
				t.Fatalf("PrometheusRule = %v", pr.Object)
			}
			groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
			exprs := map[string]string{}
			for _, g := range groups {
				rules, _ := g.(map[string]any)["rules"].([]any)
				for _, rule := range rules {
					rm := rule.(map[string]any)
					exprs[rm["alert"].(string)] = rm["expr"].(string)
					if team, _, _ := unstructured.NestedString(rm, "labels", "team"); team != "sandbox" {
						t.Errorf("alert %v lacks the alertLabels: %v", rm["alert"], rm["labels"])
					}
				}
			}
			// p99 above half of the 10s timeout; 3 days; the Deployment's name.
			for alert, want := range map[string]string{
				"SandboxWebhookLatencyNearTimeout":  "> 5",
				"SandboxWebhookCertificateExpiring": "< 3 * 86400",
				"SandboxWebhookNoReadyReplica":      `deployment="` + releaseName + `"`,
			} {
				if !strings.Contains(exprs[alert], want) {
					t.Errorf("%s expr %q lacks %q", alert, exprs[alert], want)
				}
			}
			var dash *corev1.ConfigMap
			for _, cm := range all[*corev1.ConfigMap](r) {
				if _, ok := cm.Data["sandbox-webhook.json"]; ok {
					dash = cm
				}
			}
			if dash == nil {
				t.Fatal("no dashboard ConfigMap")
			}
			if dash.Namespace != "monitoring" || dash.Labels["dashboards"] != "sandbox" || dash.Annotations["grafana_folder"] != "Sandboxes" {
				t.Errorf("dashboard ConfigMap metadata = %+v", dash.ObjectMeta)
			}
			var d map[string]any
			if err := json.Unmarshal([]byte(dash.Data["sandbox-webhook.json"]), &d); err != nil || d["uid"] != "sandbox-webhook" {
				t.Errorf("dashboard JSON: %v %v", err, d["uid"])
			}
		},
	}, {
		name: "node leak alerts: selector, thresholds, for",
		values: `
prometheusRule:
  enabled: true
  warningSeverity: ticket
  severity: page
  nodeLeak: {selector: 'job="node-exporter"', memoryCgroupsWarning: 2000000, memoryCgroupsCritical: 3000000, percpuWarningGiB: 0.5, percpuCriticalGiB: 8, for: 1h}`,
		check: func(t *testing.T, r *rendered) {
			got := groupRules(t, r, releaseName+"-node-leak")
			// Thresholds as integers, never 2e+06; the selector on both metrics.
			want := []string{
				`SandboxWebhookNodeMemoryCgroupsHigh ticket 1h: max by (instance) (node_cgroups_cgroups{subsys_name="memory",job="node-exporter"}) > 2000000`,
				`SandboxWebhookNodeMemoryCgroupsHigh page 1h: max by (instance) (node_cgroups_cgroups{subsys_name="memory",job="node-exporter"}) > 3000000`,
				`SandboxWebhookNodePercpuMemoryHigh ticket 1h: max by (instance) (node_memory_Percpu_bytes{job="node-exporter"}) > 0.5 * 1024^3`,
				`SandboxWebhookNodePercpuMemoryHigh page 1h: max by (instance) (node_memory_Percpu_bytes{job="node-exporter"}) > 8 * 1024^3`,
			}
			if !slices.Equal(got, want) {
				t.Errorf("node alerts:\n got %q\nwant %q", got, want)
			}
		},
	}, {
		name: "node health alerts: selectors, thresholds, for",
		values: `
prometheusRule:
  enabled: true
  warningSeverity: ticket
  nodeHealth: {diskSelector: 'device=~"nvme.+"', kubeletSelector: 'job="kubelet"', diskUtilization: 0.9, diskReadAwaitSeconds: 0.1, runPodSandboxSeconds: 2.5, podStartSeconds: 45, for: 30m}`,
		check: func(t *testing.T, r *rendered) {
			got := groupRules(t, r, releaseName+"-node-health")
			want := []string{
				`SandboxWebhookNodeDiskBusy ticket 30m: max by (instance, device) (rate(node_disk_io_time_seconds_total{device=~"nvme.+"}[5m])) > 0.9`,
				"SandboxWebhookNodeDiskReadsSlow ticket 30m: max by (instance, device) (\n" +
					`  rate(node_disk_read_time_seconds_total{device=~"nvme.+"}[5m])` + "\n" +
					`    / rate(node_disk_reads_completed_total{device=~"nvme.+"}[5m])` + "\n) > 0.1",
				"SandboxWebhookNodeSandboxCreationSlow ticket 30m: " +
					"1 - sum by (instance) (rate(kubelet_run_podsandbox_duration_seconds_bucket{job=\"kubelet\",le=~`2.5(\\.0)?`}[10m]))\n" +
					`  / sum by (instance) (rate(kubelet_run_podsandbox_duration_seconds_count{job="kubelet"}[10m]))` + "\n  > 0.5",
				"SandboxWebhookNodePodStartSlow ticket 30m: " +
					`histogram_quantile(0.5, sum by (instance, le) (rate(kubelet_pod_start_sli_duration_seconds_bucket{job="kubelet"}[10m])))` + "\n  > 45",
			}
			if !slices.Equal(got, want) {
				t.Errorf("node health alerts:\n got %q\nwant %q", got, want)
			}
		},
	}, {
		name:   "node health alerts off",
		values: `prometheusRule: {enabled: true, nodeHealth: {enabled: false}}`,
		check: func(t *testing.T, r *rendered) {
			if got, want := ruleGroups(t, r), []string{releaseName, releaseName + "-node-leak"}; !slices.Equal(got, want) {
				t.Errorf("groups = %v, want %v", got, want)
			}
		},
	}, {
		name:   "node leak alerts off",
		values: `prometheusRule: {enabled: true, nodeLeak: {enabled: false, memoryCgroupsWarning: 2, memoryCgroupsCritical: 1}}`,
		check: func(t *testing.T, r *rendered) {
			if got, want := ruleGroups(t, r), []string{releaseName, releaseName + "-node-health"}; !slices.Equal(got, want) {
				t.Errorf("groups = %v, want %v", got, want)
			}
		},
	}, {
		name:   "PDB with maxUnavailable",
		values: `podDisruptionBudget: {minAvailable: null, maxUnavailable: 1}`,
		check: func(t *testing.T, r *rendered) {
			pdb := one[*policyv1.PodDisruptionBudget](t, r)
			if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PDB spec = %+v", pdb.Spec)
			}
		},
	}, {
		name:   "no RBAC, no ServiceAccount",
		values: `{rbac: {create: false}, serviceAccount: {create: false, name: existing-sa}}`,
		check: func(t *testing.T, r *rendered) {
			if n := len(all[*rbacv1.ClusterRole](r)) + len(all[*rbacv1.Role](r)) + len(all[*corev1.ServiceAccount](r)); n != 0 {
				t.Errorf("%d RBAC/ServiceAccount objects rendered", n)
			}
			if sa := one[*appsv1.Deployment](t, r).Spec.Template.Spec.ServiceAccountName; sa != "existing-sa" {
				t.Errorf("serviceAccountName = %q", sa)
			}
		},
	}, {
		name:   "global values from a parent chart are accepted",
		values: `global: {imageRegistry: registry.example.com}`,
		check:  func(t *testing.T, r *rendered) { one[*appsv1.Deployment](t, r) },
	}, {
		name:   "no shutdown delay",
		values: `server: {shutdownDelaySeconds: 0}`,
		check: func(t *testing.T, r *rendered) {
			if c := deploymentContainer(t, r); !slices.Contains(c.Args, "--shutdown-delay=0s") {
				t.Errorf("args = %q", c.Args)
			}
		},
	}}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRender(t, tt.values)
			if sa := all[*corev1.ServiceAccount](r); len(sa) == 1 {
				checkBindings(t, r, sa[0])
			}
			tt.check(t, r)
		})
	}
}

func TestContradictoryValuesFail(t *testing.T) {
	tests := []struct {
		name, values, want string
	}{{
		name:   "existingSecret without secretName",
		values: `{certificates: {mode: existingSecret}, webhook: {caBundle: Q0EK}}`,
		want:   "certificates.mode=existingSecret needs certificates.existingSecret.secretName: the kubernetes.io/tls Secret holding the serving certificate",
	}, {
		name:   "existingSecret without caBundle",
		values: `{certificates: {mode: existingSecret, existingSecret: {secretName: my-tls}}}`,
		want:   "certificates.mode=existingSecret needs webhook.caBundle: the base64 PEM CA that signed the certificate in certificates.existingSecret.secretName",
	}, {
		name:   "url mode without caBundle and without cert-manager",
		values: `{webhook: {url: "https://10.0.0.1/mutate-v1-pod"}, certificates: {mode: existingSecret, existingSecret: {secretName: my-tls}}}`,
		want:   "webhook.url without cert-manager or selfManaged certificates needs webhook.caBundle: the base64 PEM CA that signed the server's certificate",
	}, {
		name:   "caBundle with cert-manager",
		values: `{webhook: {caBundle: Q0EK}}`,
		want:   "webhook.caBundle is set but certificates.mode=certManager injects the CA and would overwrite it; use certificates.mode=existingSecret to supply your own CA",
	}, {
		name:   "caBundle with selfManaged",
		values: `{webhook: {caBundle: Q0EK}, certificates: {mode: selfManaged}}`,
		want:   "webhook.caBundle is set but certificates.mode=selfManaged injects the CA and would overwrite it; use certificates.mode=existingSecret to supply your own CA",
	}, {
		name:   "secretName outside existingSecret mode",
		values: `{certificates: {mode: selfManaged, existingSecret: {secretName: my-tls}}}`,
		want:   "certificates.existingSecret.secretName is set but certificates.mode=selfManaged ignores it; set certificates.mode=existingSecret or unset the secretName",
	}, {
		name:   "issuerRef outside certManager mode",
		values: `{certificates: {mode: selfManaged, certManager: {issuerRef: {name: corp-ca}}}}`,
		want:   "certificates.certManager.issuerRef.name is set but certificates.mode=selfManaged does not use cert-manager; set certificates.mode=certManager or unset the issuerRef name",
	}, {
		name:   "inline and existing policies",
		values: `{policies: {existingConfigMap: my-policies}}`,
		want:   "policies.inline and policies.existingConfigMap are both set; use one: set policies.inline=null to use only the existing ConfigMap",
	}, {
		name:   "no policies",
		values: `{policies: {inline: null}}`,
		want:   "no policies: set policies.inline (SandboxPolicy files by name) or policies.existingConfigMap; without policies the webhook would change nothing",
	}, {
		name:   "PDB minAvailable and maxUnavailable",
		values: `{podDisruptionBudget: {maxUnavailable: 1}}`,
		want:   "podDisruptionBudget.minAvailable and podDisruptionBudget.maxUnavailable are both set; set the other to null",
	}, {
		name:   "PDB with neither",
		values: `{podDisruptionBudget: {minAvailable: null}}`,
		want:   "podDisruptionBudget.enabled=true needs podDisruptionBudget.minAvailable or podDisruptionBudget.maxUnavailable",
	}, {
		name:   "grace period shorter than the drain",
		values: `{terminationGracePeriodSeconds: 10, server: {shutdownDelaySeconds: 5, idleDrainSeconds: 0}, webhook: {timeoutSeconds: 5}}`,
		want:   "terminationGracePeriodSeconds=10 is shorter than the server's shutdown (server.shutdownDelaySeconds + server.idleDrainSeconds + webhook.timeoutSeconds + 5s = 15s): the kubelet would kill it while it still answers admissions",
	}, {
		name:   "grace period shorter than the idle drain",
		values: `{terminationGracePeriodSeconds: 30}`,
		want:   "terminationGracePeriodSeconds=30 is shorter than the server's shutdown (server.shutdownDelaySeconds + server.idleDrainSeconds + webhook.timeoutSeconds + 5s = 110s): the kubelet would kill it while it still answers admissions",
	}, {
		name:   "empty objectSelector",
		values: `{webhook: {objectSelector: {matchLabels: null}}}`,
		want:   "webhook.objectSelector selects every pod and no webhook.matchConditions narrow it: while the webhook is down, with failurePolicy=Fail, no pod could be created in any namespace it sees (cert-manager's and the CNI's included); set webhook.objectSelector.matchLabels or matchExpressions, or webhook.matchConditions that select the sandbox pods (for pods with one label or another), or webhook.allowEmptyObjectSelector=true if every pod of those namespaces is a sandbox",
	}, {
		name:   "objectSelector with only an empty matchExpressions",
		values: `{webhook: {objectSelector: {matchLabels: null, matchExpressions: []}}}`,
		want:   "webhook.objectSelector selects every pod and no webhook.matchConditions narrow it: while the webhook is down, with failurePolicy=Fail, no pod could be created in any namespace it sees (cert-manager's and the CNI's included); set webhook.objectSelector.matchLabels or matchExpressions, or webhook.matchConditions that select the sandbox pods (for pods with one label or another), or webhook.allowEmptyObjectSelector=true if every pod of those namespaces is a sandbox",
	}, {
		name:   "PDB that blocks every eviction",
		values: `{replicaCount: 1}`,
		want:   "podDisruptionBudget.minAvailable=1 with replicaCount=1 lets no replica be evicted, so node drains would hang; raise replicaCount, lower minAvailable or set podDisruptionBudget.enabled=false",
	}, {
		name:   "node memory cgroups warning at the critical threshold",
		values: `{prometheusRule: {enabled: true, nodeLeak: {memoryCgroupsWarning: 100000}}}`,
		want:   "prometheusRule.nodeLeak.memoryCgroupsWarning=100000 is not below memoryCgroupsCritical=100000: the warning would never come before the critical alert",
	}, {
		name:   "node percpu warning above the critical threshold",
		values: `{prometheusRule: {enabled: true, nodeLeak: {percpuWarningGiB: 60}}}`,
		want:   "prometheusRule.nodeLeak.percpuWarningGiB=60 is not below percpuCriticalGiB=50: the warning would never come before the critical alert",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(t, tt.values)
			if err == nil {
				t.Fatalf("rendered; want the error %q", tt.want)
			}
			// Helm prefixes fail messages with the template position.
			msg := failPrefix.ReplaceAllString(err.Error(), "")
			if msg != tt.want {
				t.Errorf("error:\n got %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}

func TestSchemaRejects(t *testing.T) {
	tests := []struct {
		name, values string
		want         []string // substrings of the error
	}{
		{"typo at the top", `replicaCont: 3`, []string{"replicaCont"}},
		{"typo in webhook", `webhook: {failurPolicy: Ignore}`, []string{"failurPolicy"}},
		{"typo in a selector", `webhook: {objectSelector: {matchLabel: {app: sandbox}}}`, []string{"matchLabel"}},
		{"typo in certificates", `certificates: {certManager: {issuer: {name: x}}}`, []string{"issuer"}},
		{"typo in securityContext", `securityContext: {readOnlyRootFileSystem: true}`, []string{"readOnlyRootFileSystem"}},
		{"replicas as a string", `replicaCount: "2"`, []string{"replicaCount"}},
		{"zero replicas", `replicaCount: 0`, []string{"replicaCount"}},
		{"unknown cert mode", `certificates: {mode: cert-manager}`, []string{"certificates", "mode"}},
		{"unknown failure policy", `webhook: {failurePolicy: fail}`, []string{"failurePolicy"}},
		{"timeout out of range", `webhook: {timeoutSeconds: 31}`, []string{"timeoutSeconds"}},
		{"bad leak-mitigation", `leakMitigation: "yes"`, []string{"leakMitigation"}},
		{"boolean leak-mitigation", `leakMitigation: true`, []string{"leakMitigation"}},
		{"plain http url", `webhook: {url: "http://127.0.0.1:9443/mutate-v1-pod"}`, []string{"url"}},
		{"policy file that is not yaml or json", `policies: {inline: {uv-cache.txt: "{}"}}`, []string{"uv-cache.txt"}},
		{"selector operator", `webhook: {objectSelector: {matchExpressions: [{key: a, operator: Equals}]}}`, []string{"operator"}},
		{"matchCondition without expression", `webhook: {matchConditions: [{name: a}]}`, []string{"expression"}},
		{"node leak threshold as a string", `prometheusRule: {nodeLeak: {memoryCgroupsWarning: "50k"}}`, []string{"memoryCgroupsWarning"}},
		{"node leak selector with braces", `prometheusRule: {nodeLeak: {selector: '{job="node"}'}}`, []string{"selector"}},
		{"typo in nodeLeak", `prometheusRule: {nodeLeak: {percpuWarningGB: 20}}`, []string{"percpuWarningGB"}},
		{"sandbox creation threshold that is no bucket bound", `prometheusRule: {nodeHealth: {runPodSandboxSeconds: 30}}`, []string{"runPodSandboxSeconds"}},
		{"disk utilization as a percentage", `prometheusRule: {nodeHealth: {diskUtilization: 80}}`, []string{"diskUtilization"}},
		{"caBundle that is not base64", `{webhook: {caBundle: "-----BEGIN CERTIFICATE-----"}, certificates: {mode: existingSecret, existingSecret: {secretName: s}}}`, []string{"caBundle"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(t, tt.values)
			if err == nil {
				t.Fatal("rendered; want a schema error")
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Errorf("not a schema error: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not mention %q: %v", w, err)
				}
			}
		})
	}
}

// checkRBAC checks that the chart grants exactly what the server needs: list and watch of
// namespaces, get of the apiserver's /metrics (the PodLevelResources and ImageVolume gates) plus the rules the certificate mode declares (certs.Options.RBAC), no more.
func checkRBAC(t *testing.T, r *rendered, o *certs.Options) {
	t.Helper()
	role, clusterRole := o.RBAC()
	wantCR := append([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	}, clusterRole...)
	if cr := one[*rbacv1.ClusterRole](t, r); !equalJSON(t, cr.Rules, wantCR) {
		t.Errorf("ClusterRole rules:\n got %+v\nwant %+v", cr.Rules, wantCR)
	}
	roles := all[*rbacv1.Role](r)
	switch {
	case len(role) == 0 && (len(roles) != 0 || len(all[*rbacv1.RoleBinding](r)) != 0):
		t.Errorf("a Role is rendered but --cert-mode=%s needs none", o.Mode)
	case len(role) != 0 && (len(roles) != 1 || !equalJSON(t, roles[0].Rules, role)):
		t.Errorf("Role rules:\n got %+v\nwant %+v", roles, role)
	}
}

// checkBindings checks that every (Cluster)RoleBinding binds a rendered role to the
// chart's ServiceAccount.
func checkBindings(t *testing.T, r *rendered, sa *corev1.ServiceAccount) {
	t.Helper()
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: namespace}}
	for _, b := range all[*rbacv1.ClusterRoleBinding](r) {
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != one[*rbacv1.ClusterRole](t, r).Name || !equalJSON(t, b.Subjects, subject) {
			t.Errorf("ClusterRoleBinding %s = %+v %+v", b.Name, b.RoleRef, b.Subjects)
		}
	}
	for _, b := range all[*rbacv1.RoleBinding](r) {
		if b.RoleRef.Kind != "Role" || b.RoleRef.Name != one[*rbacv1.Role](t, r).Name || !equalJSON(t, b.Subjects, subject) {
			t.Errorf("RoleBinding %s = %+v %+v", b.Name, b.RoleRef, b.Subjects)
		}
	}
}

func checkProbe(t *testing.T, name string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromString("health") {
		t.Errorf("%s probe = %+v, want GET %s on the health port", name, p, path)
	}
}

// ruleGroups returns the names of the PrometheusRule's rule groups.
func ruleGroups(t *testing.T, r *rendered) []string {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(one[*unstructured.Unstructured](t, r).Object, "spec", "groups")
	var names []string
	for _, g := range groups {
		names = append(names, g.(map[string]any)["name"].(string))
	}
	return names
}

// groupRules returns the rules of the PrometheusRule's group named name, one
// line each: "alert severity for: expr".
func groupRules(t *testing.T, r *rendered, name string) []string {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(one[*unstructured.Unstructured](t, r).Object, "spec", "groups")
	var got []string
	for _, g := range groups {
		if g.(map[string]any)["name"] != name {
			continue
		}
		for _, rule := range g.(map[string]any)["rules"].([]any) {
			rm := rule.(map[string]any)
			sev, _, _ := unstructured.NestedString(rm, "labels", "severity")
			got = append(got, fmt.Sprintf("%s %s %s: %s", rm["alert"], sev, rm["for"], rm["expr"]))
		}
	}
	return got
}
