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

// patched is cradmission.Patched with the patch encoded here, so that its
// size can be bounded.
func patched(message string, ops []jsonpatch.Operation) (cradmission.Response, error) {
	b, err := json.Marshal(ops)
	if err != nil {
		return cradmission.Response{}, fmt.Errorf("encoding the patch: %w", err)
	}
	if len(b) > MaxPatchBytes {
		return cradmission.Response{}, fmt.Errorf("the patch is %d bytes, more than %d: %w", len(b), MaxPatchBytes, errPatchTooLarge)
	}
	resp := cradmission.Allowed(message)
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = b, &pt
	return resp, nil
}
