// Package admission is the webhook's admission handler: it decodes the pod of
// an AdmissionReview, runs the mutation core on it with the namespace facts
// from a cache and the current policy snapshot, and answers with a JSONPatch.
// It also judges updates of pods/ephemeralcontainers, which it never patches:
// one that adds a container mounting a hostPath volume of the pod other than
// read-only and whole is denied.
//
// It plugs into controller-runtime's admission.Webhook, which decodes the
// AdmissionReview (v1 and v1beta1), recovers panics, puts a request-scoped
// logger into the context and encodes the response.
package admission
