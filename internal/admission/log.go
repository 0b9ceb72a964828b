package admission

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// requestValues are the key-value pairs of a request-scoped logger.
func requestValues(req *cradmission.Request) []any {
	return []any{"uid", req.UID, "namespace", req.Namespace,
		"operation", req.Operation, "kind", req.Kind.Kind, "dryRun", req.DryRun != nil && *req.DryRun}
}

// lazyLog is the request-scoped logger, built on first use: most admissions
// log nothing at the default level, and adding key-value pairs to a zap
// logger encodes them at once.
type lazyLog struct {
	// base is the logger to add the request's values to.
	base logr.Logger
	req  *cradmission.Request
	// The pod and the policy set, once known.
	podNS, setHash string
	pod            *corev1.Pod

	built *logr.Logger
}

func (l *lazyLog) v1() bool { return l.base.V(1).Enabled() }

// withPod adds the pod and the policy set to the lines logged from now on.
func (l *lazyLog) withPod(ns string, pod *corev1.Pod, setHash string) {
	l.podNS, l.pod, l.setHash = ns, pod, setHash
	if l.built != nil {
		b := l.built.WithValues("pod", podRef(ns, pod), "policySet", setHash)
		l.built = &b
	}
}

func (l *lazyLog) get() logr.Logger {
	if l.built == nil {
		b := l.base.WithValues(requestValues(l.req)...)
		if l.pod != nil {
			b = b.WithValues("pod", podRef(l.podNS, l.pod), "policySet", l.setHash)
		}
		l.built = &b
	}
	return *l.built
}
