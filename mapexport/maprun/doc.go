// Package maprun runs exported MutatingAdmissionPolicies with
// kube-apiserver's own MAP code, offline: Compile and Run, or Apply, give
// the pod the apiserver would store for a pod CREATE, for dry-run --map and
// the tests that hold the export to the webhook's result.
//
// It is the one package of the module that imports k8s.io/apiserver (its
// CEL compiler, match conditions and patchers, and with them cel-go, gRPC
// and OpenTelemetry). The admission server's build leaves it out (-tags
// nomap): see cli/dryrun_nomap.go.
package maprun
