// Package maprun runs exported MutatingAdmissionPolicies with
// kube-apiserver's own MAP code, offline: Compile and Run, or Apply, give
// the pod the apiserver would store for a pod CREATE, for dry-run --map and
// the tests that hold the export to the webhook's result.
//
// It is the one package of the module that imports k8s.io/apiserver (its
// CEL compiler, match conditions and patchers, and with them cel-go, gRPC
// and OpenTelemetry). Only the command line (cmd/kubectl-sandbox_webhook)
// links it; the server binary (cmd/webhook) does not, which
// cmd/webhook/deps_test.go checks.
package maprun
