package kyvernoimport

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// policyWith is a ClusterPolicy of one rule: match and the rest as YAML
// under the rule, with a patch that converts.
func policyWith(rule string) string {
	return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
spec:
  rules:
    - name: r
` + rule + `
      mutate:
        patchStrategicMerge:
          spec:
            containers:
              - (name): "*"
                env:
                  - name: UV_LINK_MODE
                    value: copy
`
}

func convertYAML(t *testing.T, yaml string) Result {
	t.Helper()
	docs, err := Split("in.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return Convert(docs)
}

// TestMatch: Kyverno's match and exclude forms become the SandboxPolicy
// match that selects the same pods, or the rule is refused with the reason.
func TestMatch(t *testing.T) {
	sandbox := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}}
	for _, tc := range []struct {
		name, rule string
		want       policy.Match
		refused    string
	}{
		{name: "every pod", rule: `
      match:
        any:
          - resources: {kinds: [Pod]}`, want: policy.Match{Namespaces: []string{"*"}}},
		{name: "legacy resources", rule: `
      match:
        resources: {kinds: [Pod], namespaces: [a, "b-*"], selector: {matchLabels: {app: sandbox}}}`,
			want: policy.Match{Namespaces: []string{"a", "b-*"}, PodSelector: sandbox}},
		{name: "any of two", rule: `
      match:
        any:
          - resources: {kinds: [Pod], namespaces: [a]}
          - resources: {kinds: [Pod], selector: {matchLabels: {app: sandbox}}}`,
			want: policy.Match{Any: []policy.MatchBlock{{Namespaces: []string{"a"}}, {PodSelector: sandbox}}}},
		{name: "all joined", rule: `
      match:
        all:
          - resources: {kinds: [Pod], namespaces: [a]}
          - resources: {kinds: [Pod], selector: {matchLabels: {app: sandbox}}}`,
			want: policy.Match{Namespaces: []string{"a"}, PodSelector: sandbox}},
		{name: "exclude namespaces and labels", rule: `
      match:
        any:
          - resources: {kinds: [Pod]}
      exclude:
        any:
          - resources: {namespaces: [kube-system]}
          - resources: {selector: {matchLabels: {app: sandbox}}}`,
			want: policy.Match{Namespaces: []string{"*"}, ExcludeNamespaces: []string{"kube-system"}, ExcludePodSelector: sandbox}},
		{name: "operation precondition", rule: `
      preconditions:
        any:
          - {key: "{{request.operation}}", operator: In, value: [CREATE, UPDATE]}
      match:
        any:
          - resources: {kinds: [Pod]}`, want: policy.Match{Namespaces: []string{"*"}}},
		{name: "other precondition", rule: `
      preconditions:
        all:
          - {key: "{{request.object.metadata.labels.tier}}", operator: Equals, value: gpu}
      match:
        any:
          - resources: {kinds: [Pod]}`, refused: "a precondition other than a check of the operation"},
		{name: "UPDATE only", rule: `
      match:
        any:
          - resources: {kinds: [Pod], operations: [UPDATE]}`, refused: "does not match CREATE"},
		{name: "another kind", rule: `
      match:
        any:
          - resources: {kinds: [Service]}`, refused: `kind "Service"`},
		{name: "excluded by namespace labels", rule: `
      match:
        any:
          - resources: {kinds: [Pod]}
      exclude:
        any:
          - resources: {namespaceSelector: {matchLabels: {team: infra}}}`, refused: "excluding namespaces by label"},
		{name: "user", rule: `
      match:
        any:
          - resources: {kinds: [Pod]}
            subjects: [{kind: User, name: alice}]`, refused: "matches the requesting user"},
		{name: "names", rule: `
      match:
        any:
          - resources: {kinds: [Pod], names: [sandbox-*]}`, refused: "matching pods by names"},
		{name: "wildcard label", rule: `
      match:
        any:
          - resources: {kinds: [Pod], selector: {matchLabels: {app: "sand*"}}}`, refused: "a wildcard in a label selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := convertYAML(t, policyWith(tc.rule))
			if tc.refused != "" {
				if len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason, tc.refused) || len(res.Policies) != 0 {
					t.Fatalf("refused %v, policies %d; want refused saying %q", res.Refused, len(res.Policies), tc.refused)
				}
				return
			}
			if !res.Exact() || len(res.Policies) != 1 {
				t.Fatalf("not converted exactly: %v %v", res.Refused, res.LeftOut)
			}
			if d := cmp.Diff(tc.want, res.Policies[0].Policy.Spec.Match); d != "" {
				t.Errorf("match (-want +got):\n%s", d)
			}
		})
	}
}

// TestNamespacedPolicy: a Policy applies in its own namespace.
func TestNamespacedPolicy(t *testing.T) {
	in := strings.Replace(policyWith(`
      match:
        any:
          - resources: {kinds: [Pod]}`), "kind: ClusterPolicy\nmetadata:\n  name: p", "kind: Policy\nmetadata:\n  name: p\n  namespace: team-a", 1)
	res := convertYAML(t, in)
	if len(res.Policies) != 1 || !cmp.Equal(res.Policies[0].Policy.Spec.Match.Namespaces, []string{"team-a"}) {
		t.Fatalf("got %+v", res)
	}
}

// TestHostileInput: what no Kyverno policy holds still gets an answer.
func TestHostileInput(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not a mapping", "- a\n- b\n", "not a YAML mapping"},
		{"other kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "not a Kyverno ClusterPolicy"},
		{"no rules", "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\nspec: {}\n", "no rules"},
		{"rules of the wrong type", "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\nspec: {rules: [1, x, null]}\n", "no mutate block"},
		{"policy name unfit", strings.Replace(policyWith("      match: {any: [{resources: {kinds: [Pod]}}]}"), "name: p", "name: P_Q", 1), "is invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := convertYAML(t, tc.in)
			if len(res.Policies) != 0 || len(res.Refused) == 0 || !strings.Contains(res.Refused[0].Reason, tc.want) {
				t.Errorf("got policies %d, refused %v; want refused saying %q", len(res.Policies), res.Refused, tc.want)
			}
		})
	}
	// An alias bomb is refused by the YAML decoder, not expanded.
	bomb := "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
	if _, err := Split("bomb.yaml", []byte(bomb)); err == nil || !strings.Contains(err.Error(), "bomb.yaml") {
		t.Errorf("an alias bomb: %v", err)
	}
}

// TestDestination: a part left out names where it can live once Kyverno no
// longer runs ClusterPolicies, by its field path.
func TestDestination(t *testing.T) {
	for path, want := range map[string]string{
		"spec.rules[0].validate":                                                           "a ValidatingAdmissionPolicy",
		"spec.rules[0].generate":                                                           "Kyverno's CEL GeneratingPolicy",
		"spec.rules[1].mutate.patchStrategicMerge.spec.tolerations":                        "the RuntimeClass's scheduling",
		"spec.rules[1].mutate.patchStrategicMerge.spec.nodeSelector":                       "the RuntimeClass's scheduling",
		"spec.rules[1].mutate.patchStrategicMerge.spec.runtimeClassName":                   "the RuntimeClass's scheduling",
		"spec.rules[2].mutate.patchStrategicMerge.spec.containers[0].image":                "a registry mirror on the nodes",
		"spec.rules[3].mutate.patchStrategicMerge.spec.containers[0].resources.limits.cpu": "a LimitRange's default for CPU",
		"spec.rules[4].mutate.patchStrategicMerge.metadata":                                "a MutatingAdmissionPolicy (Kubernetes 1.36+)",
	} {
		if got := (Finding{Path: path}).Destination(); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want it to start %q", path, got, want)
		}
	}
}
