package exportmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

func TestCommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		cmd := NewCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	multi := testkit.Path("testdata/policies/multi")

	t.Run("refuses gaps", func(t *testing.T) {
		out, err := run("-p", multi)
		if !errors.Is(err, ErrGaps) {
			t.Fatalf("error %v, want ErrGaps", err)
		}
		for _, want := range []string{`policy "c-shadow": enforcement: shadow`, "--allow-gaps"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not say %q:\n%v", want, err)
			}
		}
		if strings.Contains(out, "MutatingAdmissionPolicy") {
			t.Errorf("wrote policies although it refused:\n%s", out)
		}
	})
	t.Run("partial", func(t *testing.T) {
		out, err := run("-p", multi, "--allow-gaps")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"# PARTIAL EXPORT (--allow-gaps)", `#   - policy "c-shadow": enforcement: shadow: a MAP has no report-only mode`,
			"  name: sandbox-webhook\n", "sandbox-webhook.io/policy: a-uv-cache,b-extra\n", mapexport.GapsAnnotation + ": 'c-shadow: enforcement: shadow'"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if strings.Contains(out, "c-shadow\n") || strings.Contains(out, "name: sandbox-webhook-c-shadow") {
			t.Errorf("exported the shadow policy")
		}
	})
	t.Run("json", func(t *testing.T) {
		out, err := run("-p", testkit.Path("examples/policies/disk"), "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Kind  string
			Items []map[string]any
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		var kinds []string
		for _, it := range list.Items {
			kinds = append(kinds, it["kind"].(string))
		}
		if list.Kind != "List" || !slices.Equal(kinds, []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}) {
			t.Errorf("%s of %v", list.Kind, kinds)
		}
	})
	t.Run("static", func(t *testing.T) {
		out, err := run("-p", testkit.Path("examples/policies/memory"), "--static")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"\n  name: sandbox-webhook-sandbox-seed.static.k8s.io\n", "\n  policyName: sandbox-webhook-sandbox-seed.static.k8s.io\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if strings.HasPrefix(out, "---") || strings.Contains(out, "\n---\n#") {
			t.Errorf("a document holds only comments, which staticManifestsDir refuses:\n%s", out)
		}
	})
	t.Run("flags", func(t *testing.T) {
		for args, want := range map[string]string{
			"-p x -o xml":                  `must be one of yaml, json, not "xml"`,
			"-p x --leak-mitigation=maybe": `invalid argument "maybe" for "--leak-mitigation" flag: must be on, off or policy`,
			"-o yaml":                      "--policy is required",
		} {
			if _, err := run(strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v, want %q", args, err, want)
			}
		}
	})
}
