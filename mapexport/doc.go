// Package mapexport compiles SandboxPolicies to native
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicies and their
// bindings (Kubernetes 1.36+), which make the apiserver store the pods the
// webhook gives, field for field, status annotation included; it reports
// what CEL cannot reproduce as gaps. Compile and Run execute exported
// policies offline with the apiserver's own MutatingAdmissionPolicy code,
// for dry-run --map and the tests. NewCommand is the export-map command.
package mapexport
