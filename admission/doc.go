// Package admission is the webhook's admission handler: it decodes the pod of
// an AdmissionReview, runs the mutation core on it with the namespace facts
// from a cache and the current policy snapshot, and answers with a JSONPatch.
//
// It plugs into controller-runtime's admission.Webhook, which decodes the
// AdmissionReview (v1 and v1beta1), recovers panics, puts a request-scoped
// logger into the context and encodes the response.
package admission
