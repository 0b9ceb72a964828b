package main

import (
	"encoding/json"
	"testing"
)

// TestAnswer checks that the floor's fixed answer is an AdmissionReview an
// API server accepts: the request's uid, allowed, nothing else.
func TestAnswer(t *testing.T) {
	review := []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"abc-123","kind":{"group":"","version":"v1","kind":"Pod"},"userInfo":{"uid":"user"},"object":{"metadata":{"uid":"obj"}}}}`)
	var got struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Response   struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
		} `json:"response"`
	}
	if err := json.Unmarshal(answer(review), &got); err != nil {
		t.Fatalf("%v: %s", err, answer(review))
	}
	if got.APIVersion != "admission.k8s.io/v1" || got.Kind != "AdmissionReview" || got.Response.UID != "abc-123" || !got.Response.Allowed {
		t.Errorf("answer = %+v", got)
	}
}
