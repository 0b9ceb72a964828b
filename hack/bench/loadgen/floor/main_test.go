package main

import (
	"encoding/json"
	"testing"
)

const review = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"abc-123","kind":{"group":"","version":"v1","kind":"Pod"},"userInfo":{"uid":"user"},"object":{"metadata":{"uid":"obj"}}}}`

type answered struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   struct {
		UID       string  `json:"uid"`
		Allowed   bool    `json:"allowed"`
		PatchType *string `json:"patchType"`
		Patch     []byte  `json:"patch"`
	} `json:"response"`
}

// TestAnswer checks that the floor's fixed answer is an AdmissionReview an
// API server accepts: the request's uid, allowed, nothing else.
func TestAnswer(t *testing.T) {
	var got answered
	out := answer([]byte(review), answerTail)
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.APIVersion != "admission.k8s.io/v1" || got.Kind != "AdmissionReview" || got.Response.UID != "abc-123" ||
		!got.Response.Allowed || got.Response.PatchType != nil || got.Response.Patch != nil {
		t.Errorf("answer = %s", out)
	}
}

// TestAnswerWithPatch checks the answer of floor --patch: the request's
// uid, allowed, and the file's patch byte for byte as a JSONPatch.
func TestAnswerWithPatch(t *testing.T) {
	patch := `[{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}]`
	tail, err := patchTail([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}
	var got answered
	out := answer([]byte(review), tail)
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Response.UID != "abc-123" || !got.Response.Allowed || got.Response.PatchType == nil ||
		*got.Response.PatchType != "JSONPatch" || string(got.Response.Patch) != patch {
		t.Errorf("answer = %s", out)
	}
	for _, bad := range []string{``, `{}`, `null`, `[1,`} {
		if _, err := patchTail([]byte(bad)); err == nil {
			t.Errorf("patchTail(%q) accepted it", bad)
		}
	}
}
