package kyvernoimport

import (
	"strings"
	"testing"
)

// TestImageRewrite holds the image expressions that convert to what
// imageMirrors does for every image, and that every other is refused with
// its reason.
func TestImageRewrite(t *testing.T) {
	for _, tc := range []struct{ expr, from, to, why string }{
		{expr: `{{ regex_replace_all('^ghcr\.io/', '{{element.image}}', 'mirror.example.com/ghcr/') }}`, from: "ghcr.io", to: "mirror.example.com/ghcr"},
		{expr: `{{regex_replace_all('^ghcr\.io/org/', element.image, 'mirror.example.com:5000/org/')}}`, from: "ghcr.io/org", to: "mirror.example.com:5000/org"},
		{expr: `{{ regex_replace_all('^registry\.k8s\.io/(.*)$', element.image, 'mirror.example.com/k8s/$1') }}`, from: "registry.k8s.io", to: "mirror.example.com/k8s"},
		{expr: `{{ regex_replace_all('^quay\.io/(.+)$', element.image, 'mirror.example.com/quay/${1}') }}`, from: "quay.io", to: "mirror.example.com/quay"},
		{expr: `{{ regex_replace_all_literal('^quay\.io/', element.image, 'mirror.example.com/quay/') }}`, from: "quay.io", to: "mirror.example.com/quay"},
		{expr: `{{ regex_replace_all('^localhost:5000/', element.image, 'mirror.example.com/local/') }}`, from: "localhost:5000", to: "mirror.example.com/local"},
		// Docker Hub, however written: short names escape Kyverno's pattern.
		{expr: `{{ regex_replace_all('^docker\.io/', element.image, 'm.example.com/') }}`, why: "Docker Hub images written without their registry"},
		{expr: `{{ regex_replace_all('^index\.docker\.io/', element.image, 'm.example.com/') }}`, why: "Docker Hub images written without their registry"},
		{expr: `{{ regex_replace_all('^library/', element.image, 'm.example.com/') }}`, why: "Docker Hub images written without their registry"},
		{expr: `{{ regex_replace_all('^docker.io/', element.image, 'm.example.com/') }}`, why: "Docker Hub images written without their registry"},
		// Not a prefix of whole path components.
		{expr: `{{ regex_replace_all('^ghcr\.io', element.image, 'm.example.com') }}`, why: "not a registry or repository prefix"},
		{expr: `{{ regex_replace_all('^[^/]+', element.image, 'm.example.com') }}`, why: "not a registry or repository prefix"},
		{expr: `{{ regex_replace_all('ghcr\.io/', element.image, 'm.example.com/') }}`, why: "not a registry or repository prefix"},
		{expr: `{{ regex_replace_all('^ghcr.io/', element.image, 'm.example.com/') }}`, why: "unescaped '.'"},
		{expr: `{{ regex_replace_all('^ghcr\\.io/', element.image, 'm.example.com/') }}`, why: "matches a backslash"},
		// The replacement must keep the rest of the image after a prefix.
		{expr: `{{ regex_replace_all('^ghcr\.io/', element.image, 'm.example.com') }}`, why: "does not put the rest"},
		{expr: `{{ regex_replace_all('^ghcr\.io/(.*)$', element.image, 'm.example.com/$1/x') }}`, why: "does not put the rest"},
		{expr: `{{ regex_replace_all('^ghcr\.io/', element.image, 'm.example.com/$2/') }}`, why: "does not put the rest"},
		{expr: `{{ regex_replace_all('^ghcr\.io/', element.image, 'm.example.com/Org/') }}`, why: "must be"},
		// Other sources of the image.
		{expr: `{{ regex_replace_all('^docker\.io/', image_normalize(element.image), 'm.example.com/') }}`, why: "image_normalize"},
		{expr: `harbor.example.com/k8s/{{imageData.repository}}:{{imageData.identifier}}`, why: "image data"},
		{expr: `{{ regex_replace_all('^ghcr\.io/', element.name, 'm.example.com/') }}`, why: "not regex_replace_all"},
		{expr: `mirror.example.com/base:1`, why: "not regex_replace_all"},
	} {
		from, to, why := imageRewrite(tc.expr)
		switch {
		case tc.why == "" && (why != "" || from != tc.from || to != tc.to):
			t.Errorf("%s: got %q -> %q (%s); want %q -> %q", tc.expr, from, to, why, tc.from, tc.to)
		case tc.why != "" && !strings.Contains(why, tc.why):
			t.Errorf("%s: got %q -> %q, why %q; want a reason with %q", tc.expr, from, to, why, tc.why)
		}
	}
}

// TestHoldExpressions reads a JSON patch's text as Kyverno does: its
// expressions, nested ones within, before its YAML.
func TestHoldExpressions(t *testing.T) {
	text := `- op: replace
  path: /spec/initContainers/{{ elementIndex }}/image
  value: "{{ regex_replace_all('^ghcr\.io/', '{{element.image}}', 'm.example.com/ghcr/') }}"
`
	held, exprs := holdExpressions(text)
	if strings.Contains(held, "{{") || len(exprs) != 2 {
		t.Fatalf("held %q, expressions %q", held, exprs)
	}
	if exprs[1] != `{{ regex_replace_all('^ghcr\.io/', '{{element.image}}', 'm.example.com/ghcr/') }}` {
		t.Errorf("second expression %q", exprs[1])
	}
	r := convertYAML(t, podRule(`        foreach:
          - list: request.object.spec.containers
            patchesJson6902: |-
              - op: replace
                path: /spec/containers/{{ elementIndex }}/image
                value: "{{ regex_replace_all('^ghcr\.io/', '{{element.image}}', 'm.example.com/ghcr/') }}"
          - list: "request.object.spec.initContainers || `+"`[]`"+`"
            patchesJson6902: |-
              - op: replace
                path: /spec/initContainers/{{ elementIndex }}/image
                value: "{{ regex_replace_all('^ghcr\.io/', '{{element.image}}', 'm.example.com/ghcr/') }}"
`))
	if !r.Exact() || len(r.Policies) != 1 || len(r.Policies[0].Policy.Spec.ImageMirrors) != 1 {
		t.Fatalf("got %+v", r)
	}
	if m := r.Policies[0].Policy.Spec.ImageMirrors[0]; m.From != "ghcr.io" || m.To != "m.example.com/ghcr" {
		t.Errorf("mirror %+v", m)
	}
}

// TestPlacementConflict: a rule whose runtime class and nodeSelector
// entries differ in what they do to a pod's own value keeps the runtime
// class's, and leaves out the others by name.
func TestPlacementConflict(t *testing.T) {
	r := convertYAML(t, podRule(`        patchStrategicMerge:
          spec:
            +(runtimeClassName): gvisor
            nodeSelector:
              +(pool): gvisor
              zone: a
`))
	if len(r.LeftOut) != 1 || !strings.Contains(r.LeftOut[0].Path, "nodeSelector[zone]") || len(r.Policies) != 1 {
		t.Fatalf("left out %v, policies %d", r.LeftOut, len(r.Policies))
	}
	rt := r.Policies[0].Policy.Spec.Runtime
	if rt.OnConflict != "keep" || rt.ClassName != "gvisor" || len(rt.NodeSelector) != 1 || rt.NodeSelector["pool"] != "gvisor" {
		t.Errorf("runtime %+v", rt)
	}
}

// TestPlacementInForeach: placement in a foreach is Kyverno's only for pods
// with an element to iterate, so it is left out.
func TestPlacementInForeach(t *testing.T) {
	r := convertYAML(t, podRule(`        foreach:
          - list: "request.object.spec.initContainers || `+"`[]`"+`"
            patchStrategicMerge:
              spec:
                runtimeClassName: gvisor
            patchesJson6902: |-
              - op: add
                path: /spec/tolerations/-
                value: {key: pool, operator: Exists}
`))
	if len(r.LeftOut) != 2 || len(r.Policies) != 0 {
		t.Fatalf("left out %v, policies %d", r.LeftOut, len(r.Policies))
	}
	for _, f := range r.LeftOut {
		if !strings.Contains(f.Reason, "foreach over initContainers") {
			t.Errorf("%s", f)
		}
	}
}

// podRule is a ClusterPolicy of one rule that matches Pods, with mutate as
// the rule's mutate block (indented under it).
func podRule(mutate string) string {
	return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
spec:
  rules:
    - name: r
      match:
        any:
          - resources:
              kinds: [Pod]
      mutate:
` + mutate
}
