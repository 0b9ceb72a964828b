package input

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	gomodules "gomodules.xyz/jsonpatch/v2"
)

// TestApplyPatch: ApplyPatch, dry-run's in-place patching, gives the document
// evanphx/json-patch gives, and fails where it fails.
func TestApplyPatch(t *testing.T) {
	doc := `{"metadata":{"name":"p","labels":{"a/b":"x"}},"spec":{"containers":[{"name":"c","env":[{"name":"A"}]},{"name":"d"}],"volumes":[{"name":"v","emptyDir":{"medium":"Memory"}}]}}`
	cases := []struct {
		name  string
		patch string
	}{
		{"add member", `[{"op":"add","path":"/metadata/annotations","value":{"k":"v"}}]`},
		{"add nested and escaped", `[{"op":"add","path":"/metadata/labels/a~1c","value":"y"},{"op":"add","path":"/metadata/labels/t~0","value":"z"}]`},
		{"append and insert", `[{"op":"add","path":"/spec/containers/0/env/-","value":{"name":"B"}},{"op":"add","path":"/spec/containers/1","value":{"name":"e"}},{"op":"add","path":"/spec/containers/3","value":{"name":"f"}}]`},
		{"replace and remove", `[{"op":"replace","path":"/metadata/name","value":"q"},{"op":"remove","path":"/spec/volumes/0/emptyDir/medium"},{"op":"remove","path":"/spec/containers/0"}]`},
		{"add to a missing parent", `[{"op":"add","path":"/spec/resources/limits","value":{}}]`},
		{"replace a missing member", `[{"op":"replace","path":"/spec/nodeName","value":"n"}]`},
		{"remove a missing member", `[{"op":"remove","path":"/metadata/annotations"}]`},
		{"index out of range", `[{"op":"add","path":"/spec/containers/5","value":{}}]`},
		{"index in a missing array", `[{"op":"replace","path":"/spec/containers/2/name","value":"x"}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := jsonpatch.DecodePatch([]byte(c.patch))
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, wantErr := p.Apply([]byte(doc))
			var got map[string]any
			if err := json.Unmarshal([]byte(doc), &got); err != nil {
				t.Fatal(err)
			}
			gotErr := applyPatch(got, []byte(c.patch))
			if (gotErr != nil) != (wantErr != nil) {
				t.Fatalf("applyPatch error %v, json-patch error %v", gotErr, wantErr)
			}
			if wantErr != nil {
				return
			}
			var want map[string]any
			if err := json.Unmarshal(wantJSON, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("applyPatch gives\n%v\njson-patch gives\n%v", got, want)
			}
		})
	}
}

// applyPatch applies an encoded JSONPatch with ApplyOps.
func applyPatch(doc map[string]any, patch []byte) error {
	var ops []gomodules.Operation
	if err := json.Unmarshal(patch, &ops); err != nil {
		return err
	}
	return ApplyOps(doc, ops)
}
