package mutate_test

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

func parseSet(t testing.TB, docs ...string) *policy.Set {
	t.Helper()
	set, err := policy.ParseSet("test.yaml", []byte(strings.Join(docs, "\n---\n")))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

const header = "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicy\n"

// TestMatch covers every way a policy can decline a pod, with the reason the
// report and the logs show.
func TestMatch(t *testing.T) {
	set := parseSet(t, header+`metadata: {name: p}
spec:
  match:
    namespaces: ["rl-*", "sandboxes"]
    excludeNamespaces: ["rl-system"]
    namespaceSelector: {matchLabels: {sandboxes: enabled}}
    podSelector: {matchLabels: {app: sandbox}}
    excludePodSelector: {matchLabels: {component: router}}
    optOut: {label: skip, annotation: skip}
  env: [{name: UV_LINK_MODE, value: copy}]
`)
	enabled := map[string]string{"sandboxes": "enabled"}
	cases := []struct {
		name   string
		ns     mutate.Namespace
		edit   func(*corev1.Pod)
		opts   mutate.Options
		reason string // "" means matched
		podMsg string // whole pod skipped
	}{
		{name: "matches", ns: mutate.Namespace{Name: "rl-7", Labels: enabled}},
		{name: "exact namespace", ns: mutate.Namespace{Name: "sandboxes", Labels: enabled}},
		{name: "namespace not listed", ns: mutate.Namespace{Name: "web", Labels: enabled},
			reason: `namespace "web" is not in match.namespaces [rl-* sandboxes]`},
		{name: "namespace excluded", ns: mutate.Namespace{Name: "rl-system", Labels: enabled},
			reason: `namespace "rl-system" is excluded by match.excludeNamespaces (rl-system)`},
		{name: "namespace labels", ns: mutate.Namespace{Name: "rl-7"},
			reason: "namespace labels do not match match.namespaceSelector (sandboxes=enabled)"},
		{name: "pod labels", ns: mutate.Namespace{Name: "rl-7", Labels: enabled},
			edit:   func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} },
			reason: "pod labels do not match match.podSelector (app=sandbox)"},
		{name: "excluded pod", ns: mutate.Namespace{Name: "rl-7", Labels: enabled},
			edit:   func(p *corev1.Pod) { p.Labels["component"] = "router" },
			reason: "pod labels match match.excludePodSelector (component=router)"},
		{name: "opt-out label", ns: mutate.Namespace{Name: "rl-7", Labels: enabled},
			edit:   func(p *corev1.Pod) { p.Labels["skip"] = "true" },
			reason: "pod opted out with label skip=true"},
		{name: "opt-out annotation", ns: mutate.Namespace{Name: "rl-7", Labels: enabled},
			edit:   func(p *corev1.Pod) { p.Annotations = map[string]string{"skip": "true"} },
			reason: "pod opted out with annotation skip=true"},
		{name: "opt-out needs true", ns: mutate.Namespace{Name: "rl-7", Labels: enabled},
			edit: func(p *corev1.Pod) { p.Labels["skip"] = "yes" }},
		{name: "kube-system", ns: mutate.Namespace{Name: "kube-system", Labels: enabled},
			podMsg: "namespace kube-system is never mutated"},
		{name: "own namespace", ns: mutate.Namespace{Name: "rl-webhook", Labels: enabled},
			opts:   mutate.Options{ExcludeNamespaces: []string{"rl-webhook"}},
			podMsg: "namespace rl-webhook is excluded (--exclude-namespace)"},
		{name: "windows", ns: mutate.Namespace{Name: "rl-7", Labels: enabled},
			edit:   func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} },
			podMsg: "Windows pods are not mutated: the caches, env and pod-level resources are Linux-only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testkit.SandboxPod("", "p")
			if c.edit != nil {
				c.edit(pod)
			}
			res := mutate.Pod(pod, c.ns, set, c.opts)
			if res.PodSkipped != c.podMsg {
				t.Fatalf("PodSkipped = %q, want %q", res.PodSkipped, c.podMsg)
			}
			if c.podMsg != "" {
				if res.Changed || res.Pod != pod || len(res.Policies) != 0 {
					t.Fatalf("a skipped pod must come back untouched with no policy results: %+v", res)
				}
				return
			}
			if len(res.Policies) != 1 {
				t.Fatalf("want one policy result, got %+v", res.Policies)
			}
			pr := res.Policies[0]
			if pr.Reason.String() != c.reason || pr.Matched != (c.reason == "") {
				t.Fatalf("matched=%v reason=%q, want reason %q", pr.Matched, pr.Reason, c.reason)
			}
			if res.Changed != pr.Matched {
				t.Fatalf("Changed = %v for matched = %v", res.Changed, pr.Matched)
			}
		})
	}
}

// TestLeakMitigationOverride forces the mode both ways.
func TestLeakMitigationOverride(t *testing.T) {
	for _, c := range []struct {
		policyMode string
		override   mutate.LeakMitigation
		medium     corev1.StorageMedium
	}{
		{"memory", mutate.LeakMitigationPolicy, corev1.StorageMediumMemory},
		{"memory", mutate.LeakMitigationOn, corev1.StorageMediumDefault},
		{"disk", mutate.LeakMitigationPolicy, corev1.StorageMediumDefault},
		{"disk", mutate.LeakMitigationOff, corev1.StorageMediumMemory},
	} {
		set := parseSet(t, header+`metadata: {name: p}
spec:
  mode: `+c.policyMode+`
  match: {podSelector: {matchLabels: {app: sandbox}}}
  caches: [{name: uv-cache, mountPath: /root/.cache/uv}]
`)
		res := mutate.Pod(testkit.SandboxPod("", "p"), mutate.Namespace{Name: "n"}, set, mutate.Options{LeakMitigation: c.override})
		if got := res.Pod.Spec.Volumes[0].EmptyDir.Medium; got != c.medium {
			t.Errorf("mode %s, override %s: medium %q, want %q", c.policyMode, c.override, got, c.medium)
		}
	}
}

// TestEnvOverridePatch: overriding a valueFrom env var must remove the
// valueFrom in the patch (an intended removal), while fields unknown to the
// compiled API are never removed.
func TestEnvOverridePatch(t *testing.T) {
	set := parseSet(t, header+`metadata: {name: p}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  env: [{name: UV_LINK_MODE, value: copy, onConflict: override}]
`)
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"sandbox"}},
	  "spec":{"futureSpecField":{"a":1},"containers":[{"name":"main","image":"i","futureContainerField":true,
	  "env":[{"name":"UV_LINK_MODE","valueFrom":{"configMapKeyRef":{"name":"cm","key":"k"}}}]}]}}`)
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		t.Fatal(err)
	}
	res := mutate.Pod(pod, mutate.Namespace{Name: "n"}, set, mutate.Options{})
	ops, err := mutate.Patch(raw, pod, res.Pod)
	if err != nil {
		t.Fatal(err)
	}
	var removes, envOps []string
	for _, op := range ops {
		if op.Operation == "remove" {
			removes = append(removes, op.Path)
		}
		if strings.HasPrefix(op.Path, "/spec/containers/0/env") {
			envOps = append(envOps, op.Operation+" "+op.Path)
		}
	}
	if want := []string{"/spec/containers/0/env/0/valueFrom"}; strings.Join(removes, ",") != strings.Join(want, ",") {
		t.Errorf("remove ops %v, want exactly %v (never the unknown fields)", removes, want)
	}
	if len(envOps) != 2 {
		t.Errorf("want the valueFrom removed and the value added, got %v", envOps)
	}
}

// TestConversionSeesLaterPolicies: a disk-mode policy that sorts before a
// memory-mode policy must not convert that policy's cache, in the first pass
// or in a later one.
func TestConversionSeesLaterPolicies(t *testing.T) {
	set := parseSet(t, header+`metadata: {name: a-disk}
spec:
  mode: disk
  match: {podSelector: {matchLabels: {app: sandbox}}}
  env: [{name: A, value: "1"}]
`, header+`metadata: {name: b-memory}
spec:
  mode: memory
  match: {podSelector: {matchLabels: {app: sandbox}}}
  caches: [{name: uv-cache, mountPath: /root/.cache/uv}]
`)
	pod := testkit.SandboxPod("", "p")
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
	ns := mutate.Namespace{Name: "n"}
	first := mutate.Pod(pod, ns, set, mutate.Options{})
	media := map[string]corev1.StorageMedium{}
	for _, v := range first.Pod.Spec.Volumes {
		media[v.Name] = v.EmptyDir.Medium
	}
	if media["scratch"] != corev1.StorageMediumDefault || media["uv-cache"] != corev1.StorageMediumMemory {
		t.Fatalf("want the pod's scratch on disk and b-memory's cache on tmpfs, got %v", media)
	}
	if second := mutate.Pod(first.Pod, ns, set, mutate.Options{}); second.Changed {
		t.Fatalf("second pass changed the pod: %v", second.Pod.Spec.Volumes)
	}
}

// TestFirstDiskPolicyDecides: when two disk-mode policies disagree about a
// tmpfs volume, the first one's decision holds, in every pass.
func TestFirstDiskPolicyDecides(t *testing.T) {
	set := parseSet(t, header+`metadata: {name: a-keeps}
spec:
  mode: disk
  match: {podSelector: {matchLabels: {app: sandbox}}}
  keepMemoryVolumes: [{name: dshm}]
  env: [{name: A, value: "1"}]
`, header+`metadata: {name: b-converts}
spec:
  mode: disk
  match: {podSelector: {matchLabels: {app: sandbox}}}
  env: [{name: B, value: "1"}]
`)
	pod := testkit.SandboxPod("", "p")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	ns := mutate.Namespace{Name: "n"}
	first := mutate.Pod(pod, ns, set, mutate.Options{})
	if got := first.Pod.Spec.Volumes[0].EmptyDir.Medium; got != corev1.StorageMediumMemory {
		t.Fatalf("dshm medium %q: b-converts overrode a-keeps", got)
	}
	if got := first.Pod.Spec.Volumes[1].EmptyDir.Medium; got != corev1.StorageMediumDefault {
		t.Fatalf("scratch medium %q, want disk", got)
	}
	if second := mutate.Pod(first.Pod, ns, set, mutate.Options{}); second.Changed {
		t.Fatalf("second pass changed the pod: %s", second.Pod.Annotations[mutate.StatusAnnotation])
	}
}
