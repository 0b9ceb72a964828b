// Package admission is the webhook's admission handler: it decodes an
// AdmissionReview and its pod in one pass, runs the mutation core on the pod
// with the namespace facts from a cache and the current policy snapshot, and
// answers with a JSONPatch. It also judges updates of
// pods/ephemeralcontainers, which it never patches: one that adds a
// container mounting a hostPath volume of the pod other than read-only and
// whole is denied.
//
// The server reads the request body (within its limits) and calls the
// ReviewFunc of Handler.Review with it: that one chain checks, decodes,
// decides and answers (see Handler.Review).
package admission
