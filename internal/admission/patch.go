package admission

import (
	"encoding/json"
	"errors"
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// MaxPatchBytes bounds the patch of one admission. A sandbox pod's is 1 to
// 3 KiB; the pod caps (MaxContainers and the rest) keep any pod's well
// below it, so only a policy set injecting into a pod near every cap could
// reach it, and the pod is then refused rather than answered with a patch
// the API server would hold in full for every webhook call.
const MaxPatchBytes = 2 << 20

var errPatchTooLarge = errors.New("no pod needs so large a patch")

// patched is cradmission.Patched with the patch already encoded, by
// encodePatch instead of reflection: the same bytes, at a fraction of the
// cost, since most values are encoded already (json.RawMessage).
func patched(message string, ops []jsonpatch.Operation) (cradmission.Response, error) {
	b, err := encodePatch(ops)
	if err != nil {
		return cradmission.Response{}, err
	}
	if len(b) > MaxPatchBytes {
		return cradmission.Response{}, fmt.Errorf("the patch is %d bytes, more than %d: %w", len(b), MaxPatchBytes, errPatchTooLarge)
	}
	resp := cradmission.Allowed(message)
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = b, &pt
	return resp, nil
}

// encodePatch returns exactly what json.Marshal returns for ops whose
// json.RawMessage values are valid JSON, as every one mutate.Patch makes is
// (they are json.Marshal's output): a raw value is copied without being
// validated.
func encodePatch(ops []jsonpatch.Operation) ([]byte, error) {
	size := 2
	for _, op := range ops {
		size += 32 + len(op.Path)
		if v, ok := op.Value.(json.RawMessage); ok {
			size += len(v)
		}
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for i, op := range ops {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"op":`...)
		buf = appendString(buf, op.Operation)
		buf = append(buf, `,"path":`...)
		buf = appendString(buf, op.Path)
		// jsonpatch.Operation's MarshalJSON: a nil value is written only
		// for add and replace.
		if op.Value != nil || op.Operation == "add" || op.Operation == "replace" {
			buf = append(buf, `,"value":`...)
			v, ok := op.Value.(json.RawMessage)
			if !ok || !plainJSON(v) {
				var err error
				if v, err = json.Marshal(op.Value); err != nil {
					return nil, fmt.Errorf("encoding the patch: %w", err)
				}
			}
			buf = append(buf, v...)
		}
		buf = append(buf, '}')
	}
	return append(buf, ']'), nil
}

// appendString appends s as json.Marshal writes it.
func appendString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// plainJSON reports whether json.Marshal would copy v unchanged: compact
// (no whitespace outside strings) and holding nothing it escapes (<, >, &,
// U+2028, U+2029), as the output of json.Marshal is.
func plainJSON(v json.RawMessage) bool {
	if len(v) == 0 {
		return false
	}
	inString := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			i++
		case c == '<' || c == '>' || c == '&' || c == 0xE2: // 0xE2 starts U+2028 and U+2029
			return false
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}
