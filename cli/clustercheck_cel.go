//go:build !nomap

package cli

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/mapexport/maprun"
)

// webhookMatches evaluates a webhook's matchConditions with the apiserver's
// CEL matcher; evaluated is false in a build without it.
func webhookMatches(ctx context.Context, w *admissionregistrationv1.MutatingWebhook, pod *corev1.Pod, ns *corev1.Namespace) (matches bool, failed string, evaluated bool, err error) {
	matches, failed, err = maprun.WebhookMatches(ctx, w.MatchConditions, w.FailurePolicy, pod, ns, "sandbox-webhook-check")
	return matches, failed, true, err
}
