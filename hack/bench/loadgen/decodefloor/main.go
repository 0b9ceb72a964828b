// Command decodefloor is the second baseline hack/bench/loadgen measures the
// webhook against: a controller-runtime admission webhook that decodes each
// AdmissionReview and answers "allowed", doing nothing else (the floor of
// gobench's BenchmarkReview, served). Same certificate and TLS settings
// as the webhook: TLS 1.3, HTTP/1.1 only, keep-alive.
package main

import (
	"context"
	"net/http"

	"github.com/go-logr/logr"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/loadgen/internal/floorserver"
)

func main() {
	floorserver.Main("decodefloor", nil, func() (http.Handler, error) {
		return &cradmission.Webhook{
			Handler: cradmission.HandlerFunc(func(context.Context, cradmission.Request) cradmission.Response {
				return cradmission.Allowed("")
			}),
			LogConstructor: func(logr.Logger, *cradmission.Request) logr.Logger { return logr.Discard() },
		}, nil
	})
}
