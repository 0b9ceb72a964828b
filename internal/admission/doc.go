// Package admission is the webhook's admission handler: a controller-runtime
// admission.Handler that runs the mutation core on the pod of a CREATE with
// the namespace facts from a cache and the current policy snapshot, and
// answers with a JSONPatch. It also judges updates of
// pods/ephemeralcontainers: one that adds a container mounting a hostPath
// volume of the pod other than read-only and whole is denied, and the images
// of the containers one adds are mirrored by the policies that select the
// pod.
//
// Handler.Webhook is the admission path: it decodes the review and its pod
// in one pass and hands the request to controller-runtime's admission
// webhook around the handler. Before it decodes anything, the server counts
// what the review asks it to hold (PriceReview), which prices the webhook's
// memory and is taken from its request budget, notes where the pod is, and
// refuses a body that is not a JSON object (RefuseNotObject); the handler
// refuses a decoded pod beyond the caps (MaxContainers and the rest).
package admission
