package kyvernoimport

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

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

// TestForeachLists: a foreach list is one container list of the pod spec
// the rule edits, or several flattened; anything else is not read as one.
func TestForeachLists(t *testing.T) {
	pod := &ruleConverter{podPath: podSpecPath}
	template := &ruleConverter{podPath: templatePath}
	for _, tc := range []struct {
		r    *ruleConverter
		list string
		want []string
	}{
		{pod, "request.object.spec.containers", []string{"containers"}},
		{pod, "request.object.spec.initContainers || `[]`", []string{"initContainers"}},
		{pod, "request.object.spec.[ephemeralContainers, initContainers, containers][]", []string{"ephemeralContainers", "initContainers", "containers"}},
		{pod, "request.object.spec.[initContainers,containers][] || `[]`", []string{"initContainers", "containers"}},
		{pod, "request.object.spec.[containers, containers][]", nil},
		{pod, "request.object.spec.[containers, volumes][]", nil},
		{pod, "request.object.spec.[initContainers, containers]", nil},
		{pod, "request.object.spec.containers[?name != 'istio-proxy']", nil},
		{pod, "request.object.spec.template.spec.containers", nil},
		{template, "request.object.spec.template.spec.[initContainers, containers][]", []string{"initContainers", "containers"}},
		{template, "request.object.spec.containers", nil},
	} {
		got, ok := tc.r.foreachLists(tc.list)
		if ok != (tc.want != nil) || !cmp.Equal(got, tc.want) {
			t.Errorf("%v %q: %v %v, want %v", tc.r.podPath, tc.list, got, ok, tc.want)
		}
	}
}

// mutatePolicy is a ClusterPolicy of the rules given as YAML.
func mutatePolicy(rules string) string {
	return "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: p\nspec:\n  rules:\n" + rules
}

// envRule is a rule named name that matches match (a resources block) and
// sets UV_LINK_MODE in the containers patch reaches: patch is the pod spec
// key and its element's name, under the pod spec at prefix.
func envRule(name, match, prefix, list, element string) string {
	return `    - name: ` + name + `
      match: {any: [{resources: ` + match + `}]}
      mutate:
        patchStrategicMerge:
          ` + prefix + `{` + list + `: [{` + element + `, env: [{name: UV_LINK_MODE, value: copy}]}]}` + strings.Repeat("}", strings.Count(prefix, "{")) + "\n"
}

// TestContainerLists: which containers a rule reaches becomes the
// SandboxPolicy's init-container choice; ephemeral containers are noted,
// and what reaches no selection a SandboxPolicy has is left out.
func TestContainerLists(t *testing.T) {
	const pods = `{kinds: [Pod]}`
	foreach := func(list, patch string) string {
		return `    - name: r
      match: {any: [{resources: {kinds: [Pod]}}]}
      mutate:
        foreach:
          - list: "` + list + `"
            patchStrategicMerge:
              spec:
` + patch
	}
	const anchored = `[{(name): "{{ element.name }}", env: [{name: UV_LINK_MODE, value: copy}]}]`
	for _, tc := range []struct {
		name, rules string
		init        *bool // nil: the default, init containers included
		leftOut     string
		note        string
	}{
		{name: "app containers of three lists", rules: foreach("request.object.spec.[ephemeralContainers, initContainers, containers][]", "                containers: "+anchored+"\n"),
			init: ptr.To(false)},
		{name: "init and app containers", rules: foreach("request.object.spec.[initContainers, containers][]", "                containers: "+anchored+"\n                initContainers: "+anchored+"\n")},
		{name: "ephemeral noted", rules: foreach("request.object.spec.[ephemeralContainers, containers][]", "                containers: "+anchored+"\n                ephemeralContainers: "+anchored+"\n"),
			init: ptr.To(false), note: "edits ephemeral containers"},
		{name: "init containers alone", rules: foreach("request.object.spec.[initContainers, containers][]", "                initContainers: "+anchored+"\n"),
			leftOut: "goes into init containers only"},
		{name: "a list not iterated", rules: foreach("request.object.spec.containers", "                initContainers: "+anchored+"\n"),
			leftOut: "patches initContainers while iterating containers"},
		{name: "unanchored over two lists", rules: foreach("request.object.spec.[initContainers, containers][]", "                containers: [{name: \"{{ element.name }}\", env: [{name: A, value: b}]}]\n"),
			leftOut: "adds a container of its name"},
		{name: "ephemeral added", rules: envRule("r", pods, "spec: ", "ephemeralContainers", "name: debug"), leftOut: "adds an ephemeral container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := convertYAML(t, mutatePolicy(tc.rules))
			if tc.leftOut != "" {
				if len(res.LeftOut) == 0 || !strings.Contains(res.LeftOut[0].Reason, tc.leftOut) {
					t.Fatalf("left out %v, want %q", res.LeftOut, tc.leftOut)
				}
				return
			}
			if !res.Exact() || len(res.Policies) != 1 {
				t.Fatalf("not converted exactly: %v %v", res.Refused, res.LeftOut)
			}
			c := res.Policies[0]
			if got := c.Policy.Spec.Containers.InitContainers; !cmp.Equal(got, tc.init) {
				t.Errorf("initContainers %v, want %v", ptr.Deref(got, true), ptr.Deref(tc.init, true))
			}
			if tc.note != "" && !slices.ContainsFunc(c.Notes, func(n string) bool { return strings.Contains(n, tc.note) }) {
				t.Errorf("notes %q, want one saying %q", c.Notes, tc.note)
			}
		})
	}
}

// TestWorkloadRules: a rule for workloads edits their pod template and
// converts to the pod-level item with a difference, or is refused by name
// where its match does not carry over to pods; a rule that duplicates
// another converts once.
func TestWorkloadRules(t *testing.T) {
	const (
		pods        = `{kinds: [Pod], namespaces: [sandboxes]}`
		deployments = `{kinds: [Deployment, Job], namespaces: [sandboxes]}`
		cronjobs    = `{kinds: [CronJob], namespaces: [sandboxes]}`
		template    = `spec: {template: {spec: `
		jobTemplate = `spec: {jobTemplate: {spec: {template: {spec: `
		every       = `(name): "*"`
	)
	for _, tc := range []struct {
		name, rules string
		rules2      []string // the rules the one SandboxPolicy names
		differ      int
		refused     string
		leftOut     string
	}{
		{name: "deployments", rules: envRule("d", deployments, template, "containers", every), rules2: []string{"d"}, differ: 1},
		{name: "cronjobs", rules: envRule("c", cronjobs, jobTemplate, "containers", every), rules2: []string{"c"}, differ: 1},
		{name: "pod rule and its twins", rules: envRule("c", cronjobs, jobTemplate, "containers", every) + envRule("d", deployments, template, "containers", every) + envRule("p", pods, "spec: ", "containers", every),
			rules2: []string{"p", "c", "d"}},
		{name: "twins of each other", rules: envRule("d", deployments, template, "containers", every) + envRule("c", cronjobs, jobTemplate, "containers", every),
			rules2: []string{"d", "c"}, differ: 2},
		{name: "workload labels", rules: envRule("d", `{kinds: [Deployment], selector: {matchLabels: {app: sandbox}}}`, template, "containers", every), refused: "selects the workloads by their own labels"},
		{name: "workload labels excluded", rules: envRule("d", deployments, template, "containers", every) + "      exclude: {any: [{resources: {selector: {matchLabels: {app: grader}}}}]}\n",
			refused: "selects the workloads by their own labels"},
		{name: "cronjobs and deployments", rules: envRule("d", `{kinds: [Deployment, CronJob]}`, template, "containers", every), refused: "matches CronJobs and other workloads"},
		{name: "pods and workloads apart", rules: strings.Replace(envRule("d", pods, "spec: ", "containers", every), "{any: [{resources: "+pods+"}]}", "{any: [{resources: "+pods+"}, {resources: "+deployments+"}]}", 1),
			refused: "one block matches Pods, another only workloads"},
		{name: "a Deployment patched at the pod's paths", rules: envRule("d", deployments, "spec: ", "containers", every), leftOut: "whose pods are made from spec.template.spec"},
		{name: "a CronJob patched at spec.template", rules: envRule("c", cronjobs, template, "containers", every), leftOut: "whose pods are made from spec.jobTemplate.spec.template.spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := convertYAML(t, mutatePolicy(tc.rules))
			switch {
			case tc.refused != "":
				if len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason, tc.refused) || len(res.Policies) != 0 {
					t.Fatalf("refused %v, policies %d; want refused saying %q", res.Refused, len(res.Policies), tc.refused)
				}
				return
			case tc.leftOut != "":
				if len(res.LeftOut) == 0 || !strings.Contains(res.LeftOut[0].Reason, tc.leftOut) {
					t.Fatalf("left out %v, want %q", res.LeftOut, tc.leftOut)
				}
				return
			}
			if !res.Exact() || len(res.Policies) != 1 {
				t.Fatalf("not converted exactly into one: %v %v, %d policies", res.Refused, res.LeftOut, len(res.Policies))
			}
			c := res.Policies[0]
			if !cmp.Equal(c.From[0].Rules, tc.rules2) {
				t.Errorf("from rules %v, want %v", c.From[0].Rules, tc.rules2)
			}
			if want := (policy.Match{Namespaces: []string{"sandboxes"}}); !cmp.Equal(c.Policy.Spec.Match, want) {
				t.Errorf("match %+v, want %+v", c.Policy.Spec.Match, want)
			}
			if len(c.Policy.Spec.Env) != 1 {
				t.Errorf("env %+v, want UV_LINK_MODE once", c.Policy.Spec.Env)
			}
			if len(res.Differences) != tc.differ {
				t.Errorf("differences %v, want %d", res.Differences, tc.differ)
			}
			for _, d := range res.Differences {
				if !strings.Contains(d.Reason, "bare pods and those of other controllers included") {
					t.Errorf("difference %q does not say the SandboxPolicy mutates bare pods too", d.Reason)
				}
			}
		})
	}
}

// TestInitPair: a rule for the init containers that puts there what another
// rule of the same match puts into the app containers merges into it; one
// that differs in any part, or selects other pods, does not.
func TestInitPair(t *testing.T) {
	const (
		pods  = `{kinds: [Pod], namespaces: [sandboxes]}`
		other = `{kinds: [Pod], namespaces: [eval]}`
		every = `(name): "*"`
	)
	withValue := func(rule, value string) string { return strings.Replace(rule, "value: copy", "value: "+value, 1) }
	for _, tc := range []struct {
		name, rules string
		merged      bool
	}{
		{"app then init", envRule("app", pods, "spec: ", "containers", every) + envRule("init", pods, "spec: ", "initContainers", every), true},
		{"init then app", envRule("init", pods, "spec: ", "initContainers", every) + envRule("app", pods, "spec: ", "containers", every), true},
		{"another value", envRule("app", pods, "spec: ", "containers", every) + withValue(envRule("init", pods, "spec: ", "initContainers", every), "symlink"), false},
		{"other pods", envRule("app", pods, "spec: ", "containers", every) + envRule("init", other, "spec: ", "initContainers", every), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := convertYAML(t, mutatePolicy(tc.rules))
			if !tc.merged {
				if res.Exact() || len(res.LeftOut) == 0 || !slices.ContainsFunc(res.LeftOut, func(f Finding) bool { return f.Rule == "init" }) {
					t.Fatalf("left out %v; want the init rule left out", res.LeftOut)
				}
				if len(res.Policies) != 1 || res.Policies[0].Policy.Spec.Containers.InitContainers == nil || *res.Policies[0].Policy.Spec.Containers.InitContainers {
					t.Errorf("want the app rule alone, init containers off: %+v", res.Policies)
				}
				return
			}
			if !res.Exact() || len(res.Policies) != 1 {
				t.Fatalf("not converted exactly into one: %v %v", res.Refused, res.LeftOut)
			}
			c := res.Policies[0]
			if c.Policy.Spec.Containers.InitContainers != nil {
				t.Errorf("initContainers %v, want the default (included)", *c.Policy.Spec.Containers.InitContainers)
			}
			if len(c.From[0].Rules) != 2 || len(c.Policy.Spec.Env) != 1 {
				t.Errorf("from %v, env %+v: want both rules, UV_LINK_MODE once", c.From[0].Rules, c.Policy.Spec.Env)
			}
		})
	}
}

// TestNameSelection: a (name) anchor's pattern and a foreach's
// preconditions on the element's name become the globs a SandboxPolicy
// includes and excludes, where Kyverno compares them as globs; anything
// else is refused with why.
func TestNameSelection(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    selection
		refused string
	}{
		{pattern: "*"},
		{pattern: "main", want: selection{include: []string{"main"}}},
		{pattern: "main | worker-?", want: selection{include: []string{"main", "worker-?"}}},
		{pattern: "!istio-proxy", want: selection{exclude: []string{"istio-proxy"}}},
		{pattern: "sandbox-* & !sandbox-grader", want: selection{include: []string{"sandbox-*"}, exclude: []string{"sandbox-grader"}}},
		{pattern: "a & b", refused: "two names at once"},
		{pattern: "a | !b", refused: "joins negations"},
		{pattern: "1-3", refused: "a range of numbers"},
		{pattern: "100m", refused: "a quantity"},
		{pattern: "1h", refused: "a duration"},
		{pattern: "[a-z]*", refused: "characters a container name does not"},
		{pattern: ">5", refused: "characters a container name does not"},
	} {
		got, why := anchorSelection(tc.pattern)
		if tc.refused != "" {
			if !strings.Contains(why, tc.refused) {
				t.Errorf("(name) %q: %+v %q, want refused saying %q", tc.pattern, got, why, tc.refused)
			}
			continue
		}
		if why != "" || !got.equal(tc.want) {
			t.Errorf("(name) %q: %+v %q, want %+v", tc.pattern, got, why, tc.want)
		}
	}
	for _, tc := range []struct {
		name, pre string
		want      selection
		refused   string
	}{
		{name: "any not in", pre: `{all: [{key: "{{ element.name }}", operator: AnyNotIn, value: [istio-proxy, router]}]}`, want: selection{exclude: []string{"istio-proxy", "router"}}},
		{name: "legacy list", pre: `[{key: "{{element.name}}", operator: NotEquals, value: istio-proxy}]`, want: selection{exclude: []string{"istio-proxy"}}},
		{name: "in and not", pre: `{all: [{key: "{{ element.name }}", operator: AnyIn, value: ["sandbox-*"]}, {key: "{{ element.name }}", operator: NotEquals, value: sandbox-grader}]}`,
			want: selection{include: []string{"sandbox-*"}, exclude: []string{"sandbox-grader"}}},
		{name: "any of two includes", pre: `{any: [{key: "{{ element.name }}", operator: Equals, value: main}, {key: "{{ element.name }}", operator: AnyIn, value: ["worker-*"]}]}`,
			want: selection{include: []string{"main", "worker-*"}}},
		{name: "all of two includes", pre: `{all: [{key: "{{ element.name }}", operator: Equals, value: main}, {key: "{{ element.name }}", operator: AnyIn, value: ["worker-*"]}]}`, refused: "two conditions that both select names"},
		{name: "any of excludes", pre: `{any: [{key: "{{ element.name }}", operator: NotEquals, value: a}, {key: "{{ element.name }}", operator: NotEquals, value: b}]}`, refused: "any of conditions that exclude"},
		{name: "another key", pre: `{all: [{key: "{{ element.image }}", operator: Equals, value: python}]}`, refused: "another value than the element's name"},
		{name: "another operator", pre: `{all: [{key: "{{ element.name }}", operator: GreaterThan, value: a}]}`, refused: `operator "GreaterThan"`},
		{name: "equals a glob that could match a number", pre: `{all: [{key: "{{ element.name }}", operator: Equals, value: "*-main"}]}`, refused: "looks like a number"},
		{name: "all and any", pre: `{all: [{key: "{{ element.name }}", operator: Equals, value: a}], any: [{key: "{{ element.name }}", operator: Equals, value: b}]}`, refused: "all and any conditions together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pre any
			if err := sigsyaml.Unmarshal([]byte(tc.pre), &pre); err != nil {
				t.Fatal(err)
			}
			got, _, why := foreachSelection(pre, nil)
			if tc.refused != "" {
				if !strings.Contains(why, tc.refused) {
					t.Errorf("%+v %q, want refused saying %q", got, why, tc.refused)
				}
				return
			}
			if why != "" || !got.equal(tc.want) {
				t.Errorf("%+v %q, want %+v", got, why, tc.want)
			}
		})
	}
}

// TestAnchorVolumes: Kyverno adds a rule's volumes whether or not a (name)
// anchor selects a container of the pod; the webhook adds a cache only where
// it mounts it, and the import lists that difference.
func TestAnchorVolumes(t *testing.T) {
	rule := func(anchor string) string {
		return `    - name: r
      match: {any: [{resources: {kinds: [Pod]}}]}
      mutate:
        patchStrategicMerge:
          spec:
            volumes: [{name: uv-cache, emptyDir: {sizeLimit: 1Gi}}]
            containers: [{(name): "` + anchor + `", volumeMounts: [{name: uv-cache, mountPath: /root/.cache/uv}]}]
`
	}
	for anchor, want := range map[string]int{"*": 0, "main | worker-*": 1} {
		res := convertYAML(t, mutatePolicy(rule(anchor)))
		if !res.Exact() || len(res.Policies) != 1 || len(res.Differences) != want {
			t.Errorf("(name) %q: %d policies, differences %v, left out %v; want %d differences", anchor, len(res.Policies), res.Differences, res.LeftOut, want)
		}
	}
}

// TestPairedIntoDuplicate: an init rule pairs with an app rule that a third
// rule, covering both lists at once, duplicates: all three name the one
// SandboxPolicy.
func TestPairedIntoDuplicate(t *testing.T) {
	const pods = `{kinds: [Pod], namespaces: [sandboxes]}`
	both := `    - name: both
      match: {any: [{resources: ` + pods + `}]}
      mutate:
        patchStrategicMerge:
          spec:
            containers: [{(name): "*", env: [{name: UV_LINK_MODE, value: copy}]}]
            initContainers: [{(name): "*", env: [{name: UV_LINK_MODE, value: copy}]}]
`
	res := convertYAML(t, mutatePolicy(both+envRule("app", pods, "spec: ", "containers", `(name): "*"`)+envRule("init", pods, "spec: ", "initContainers", `(name): "*"`)))
	if !res.Exact() || len(res.Policies) != 1 {
		t.Fatalf("not converted exactly into one: %v %v, %d policies", res.Refused, res.LeftOut, len(res.Policies))
	}
	if got := res.Policies[0].From[0].Rules; !cmp.Equal(got, []string{"both", "app", "init"}) {
		t.Errorf("from rules %v, want both, app, init", got)
	}
}

// TestWorkloadJSONPatch: a JSON patch of a workload's pod template is read
// below its path; one outside it is left out.
func TestWorkloadJSONPatch(t *testing.T) {
	rule := func(kind, list, path string) string {
		return `    - name: r
      match: {any: [{resources: {kinds: [` + kind + `], namespaces: [sandboxes]}}]}
      mutate:
        foreach:
          - list: request.object.` + list + `.containers
            patchesJson6902: |-
              - op: add
                path: ` + path + `/containers/{{elementIndex}}/env/-
                value: {name: UV_LINK_MODE, value: copy}
`
	}
	for _, tc := range []struct {
		kind, list, path string
		exact            bool
	}{
		{"Deployment", "spec.template.spec", "/spec/template/spec", true},
		{"CronJob", "spec.jobTemplate.spec.template.spec", "/spec/jobTemplate/spec/template/spec", true},
		{"Deployment", "spec.template.spec", "/spec", false},
		{"CronJob", "spec.jobTemplate.spec.template.spec", "/spec/template/spec", false},
	} {
		res := convertYAML(t, mutatePolicy(rule(tc.kind, tc.list, tc.path)))
		if tc.exact != res.Exact() || tc.exact && (len(res.Policies) != 1 || len(res.Policies[0].Policy.Spec.Env) != 1) {
			t.Errorf("%s %s: exact %v (left out %v), %d policies; want exact %v", tc.kind, tc.path, res.Exact(), res.LeftOut, len(res.Policies), tc.exact)
		}
		if !tc.exact && (len(res.LeftOut) != 1 || !strings.Contains(res.LeftOut[0].Reason, "is not in the pod template")) {
			t.Errorf("%s %s: left out %v, want the path named outside the pod template", tc.kind, tc.path, res.LeftOut)
		}
	}
}
