package check

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// expiryWarning is how close to its expiry a certificate is reported.
const expiryWarning = 7 * 24 * time.Hour

// installFinding is one result of check install.
type installFinding struct {
	// Level is ok, warning or error.
	Level   string `json:"level"`
	Subject string `json:"subject"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

type installReport struct {
	PolicySource string           `json:"policySource,omitempty"`
	Findings     []installFinding `json:"findings"`
	OK           bool             `json:"ok"`
}

func (rep *installReport) add(level, subject, msg, fix string) {
	rep.Findings = append(rep.Findings, installFinding{Level: level, Subject: subject, Message: msg, Fix: fix})
}

// addPolicyError reports policies that do not load: a finding per problem,
// as each is printed on a line of its own.
func (rep *installReport) addPolicyError(err error) {
	var perr *policy.Error
	if !errors.As(err, &perr) {
		rep.add("error", "policies", err.Error(), "")
		return
	}
	for _, p := range perr.Problems {
		rep.add("error", "policies", p.String(), "")
	}
}

func newCheckInstallCommand(o *clusterCheckOptions, streams command.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "install",
		Short: "Check the installed webhook: caBundle, certificate, endpoints, served policies, selectors",
		Long: `Check every installed sandbox-webhook MutatingWebhookConfiguration (or
--configuration):

- its caBundle parses and verifies the certificate the webhook serves (for a
  service webhook, reached at <service>.<namespace>.svc, so from inside the
  cluster; from outside it is reported as not reachable), and how soon the
  certificate expires (an error when expired, a warning within 7 days);
- the Service has ready endpoints;
- the policy hash the server serves (its /status, given as --status-url)
  equals that of the release's policies ConfigMap (or --policy);
- every policy's pod selection (match, or each match.any block) is reachable
  through the configuration's namespaceSelector and objectSelector: a policy
  whose pods are never sent to the webhook is an error, with the fix.

Exit codes: 0 no error; 4 an error found; 1 the check could not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.runInstall(cmd.Context(), streams)
		},
	}
}

func (o *clusterCheckOptions) runInstall(ctx context.Context, streams command.IOStreams) error {
	ctx, cs, _, err := o.start(ctx)
	if err != nil {
		return err
	}
	configs, err := o.configurations(ctx, cs)
	if err != nil {
		return err
	}
	rep := &installReport{}
	if len(configs) == 0 {
		rep.add("error", "configuration", "no sandbox-webhook MutatingWebhookConfiguration is installed", "install the chart, or pass --configuration")
	}
	for _, c := range configs {
		for _, w := range c.Webhooks {
			rep.checkWebhook(ctx, cs, c.Name+"/"+w.Name, w)
		}
	}
	if set, source, err := o.loadPolicies(ctx, cs, configs, o.releaseNS(configs)); err != nil {
		var usage *command.ExitCodeError
		if errors.As(err, &usage) {
			return err // which release to read is the caller's to say, as in check pod
		}
		rep.addPolicyError(err)
	} else {
		rep.PolicySource = source
		un := Reachable(set, configs)
		for _, u := range un {
			rep.add("error", "policy "+u.Policy+" "+u.Block, u.Reason, u.Fix)
		}
		if len(un) == 0 && len(configs) > 0 {
			n := "1 policy"
			if len(set.Policies) != 1 {
				n = fmt.Sprintf("%d policies", len(set.Policies))
			}
			rep.add("ok", "policies", fmt.Sprintf("every policy's pod selection reaches the webhook (%s, %s)", n, source), "")
		}
		if o.statusURL != "" {
			rep.servedPolicies(ctx, o.statusURL, set, source)
		}
	}
	rep.OK = !slices.ContainsFunc(rep.Findings, func(f installFinding) bool { return f.Level == "error" })
	if err := writeInstallReport(streams.Out, rep, o.output); err != nil {
		return err
	}
	if !rep.OK {
		return &command.ExitCodeError{Code: command.ExitCheckFailed, Err: errors.New("check install found errors")}
	}
	return nil
}

// servedPolicies compares the policy set the server at statusURL serves
// with set, read from source.
func (rep *installReport) servedPolicies(ctx context.Context, statusURL string, set *policy.Set, source string) {
	st, err := readStatus(ctx, statusURL)
	served := st.Policies.Hash
	switch {
	case err != nil:
		rep.add("error", "served policies", fmt.Sprintf("reading %s: %v", statusURL, err), "")
	case served != set.Hash:
		rep.add("error", "served policies", fmt.Sprintf("the server serves policy set %s, but %s holds %s", served, source, set.Hash),
			"the server has not reloaded: look at its /status for the rejected reload, or restart it")
	default:
		rep.add("ok", "served policies", "the server serves policy set "+served+", as "+source+" holds", "")
	}
}

// checkWebhook checks one webhook's caBundle, endpoints and certificate.
func (rep *installReport) checkWebhook(ctx context.Context, cs kubernetes.Interface, subject string, w admissionregistrationv1.MutatingWebhook) {
	pool, cas, err := CAPool(w.ClientConfig.CABundle)
	if err != nil {
		rep.add("error", subject, err.Error(), "set the caBundle to the CA that signed the serving certificate (cert-manager's cainjector, or the chart's webhook.caBundle)")
		return
	}
	for _, ca := range cas {
		rep.expiry(subject, "the caBundle's CA "+ca.Subject.CommonName, ca.NotAfter)
	}
	var address, serverName string
	switch cc := w.ClientConfig; {
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			rep.add("error", subject, "invalid url: "+err.Error(), "")
			return
		}
		address, serverName = net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "443")), u.Hostname()
	case cc.Service != nil:
		s := cc.Service
		if _, err := cs.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{}); err != nil {
			rep.add("error", subject, fmt.Sprintf("service %s/%s: %v", s.Namespace, s.Name, err), "install the chart's Service, or fix clientConfig.service")
			return
		}
		eps, err := cs.DiscoveryV1().EndpointSlices(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + s.Name})
		if err != nil {
			rep.add("error", subject, fmt.Sprintf("endpoints of service %s/%s: %v", s.Namespace, s.Name, err), "")
			return
		}
		ready := 0
		for _, sl := range eps.Items {
			for _, e := range sl.Endpoints {
				if ptr.Deref(e.Conditions.Ready, true) {
					ready++
				}
			}
		}
		if ready == 0 {
			rep.add("error", subject, fmt.Sprintf("service %s/%s has no ready endpoint: no replica answers (failurePolicy %s)", s.Namespace, s.Name, FailurePolicy(&w)),
				"look at the webhook Deployment's pods: kubectl -n "+s.Namespace+" get pods,events")
		} else {
			rep.add("ok", subject, fmt.Sprintf("service %s/%s has %d ready endpoints", s.Namespace, s.Name, ready), "")
		}
		serverName = s.Name + "." + s.Namespace + ".svc"
		address = net.JoinHostPort(serverName, strconv.Itoa(int(ptr.Deref(s.Port, 443))))
	default:
		rep.add("error", subject, "clientConfig has neither url nor service", "")
		return
	}
	serving, err := ServingCert(ctx, address, serverName, pool)
	if err != nil {
		level := "error"
		if w.ClientConfig.Service != nil {
			level = "warning" // the service's name resolves only inside the cluster
		}
		rep.add(level, subject, fmt.Sprintf("cannot reach %s to verify its certificate against the caBundle: %v", address, err), "run check install from inside the cluster")
		return
	}
	if serving.Unverified != nil {
		rep.add("error", subject, fmt.Sprintf("the caBundle does not verify the certificate served at %s: %v", address, serving.Unverified),
			"set the caBundle to the CA that signed the serving certificate: with cert-manager, check the cert-manager.io/inject-ca-from annotation and the cainjector; otherwise the chart's webhook.caBundle")
	} else {
		rep.add("ok", subject, "the caBundle verifies the certificate served at "+address, "")
	}
	if len(serving.Chain) > 0 {
		rep.expiry(subject, "the serving certificate", serving.Chain[0].NotAfter)
	}
}

func (rep *installReport) expiry(subject, what string, notAfter time.Time) {
	left, at := time.Until(notAfter), notAfter.UTC().Format(time.RFC3339)
	switch {
	case left <= 0:
		rep.add("error", subject, fmt.Sprintf("%s expired at %s", what, at), "renew it (cert-manager renews its own; certs generate for a self-managed one)")
	case left < expiryWarning:
		rep.add("warning", subject, fmt.Sprintf("%s expires at %s, in %s", what, at, left.Round(time.Minute)), "renew it before it expires")
	default:
		rep.add("ok", subject, fmt.Sprintf("%s expires at %s", what, at), "")
	}
}

// serverStatus is the part of the server's /status that check reads.
type serverStatus struct {
	Policies struct {
		Hash string `json:"hash"`
	} `json:"policies"`
	LeakMitigation struct {
		Mode string `json:"mode"`
	} `json:"leakMitigation"`
}

// statusClient reads the server's /status: a port-forward that hangs
// fails the check in seconds instead of holding it, and a redirect is
// followed only on --status-url's own scheme, host and port.
var statusClient = &http.Client{Timeout: 10 * time.Second, CheckRedirect: sameOrigin}

// maxStatusBytes bounds the /status body read; the server's is a few KB.
const maxStatusBytes = 1 << 20

// sameOrigin refuses a redirect off the scheme, host and port of the URL
// first asked for: what --status-url names is the server whose policies
// are checked, and a redirect elsewhere would have another answer for it.
func sameOrigin(req *http.Request, via []*http.Request) error {
	origin := func(u *url.URL) string {
		port := cmp.Or(u.Port(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
		return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
	}
	if first := via[0].URL; origin(req.URL) != origin(first) {
		return fmt.Errorf("redirected to %s, off the scheme, host and port of --status-url (%s://%s): not followed", req.URL.Redacted(), first.Scheme, first.Host)
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// readStatus reads the server's /status at statusURL (its health port).
func readStatus(ctx context.Context, statusURL string) (serverStatus, error) {
	var st serverStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statusURL, nil)
	if err != nil {
		return st, err
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("HTTP %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxStatusBytes)).Decode(&st); err != nil {
		return st, err
	}
	if st.Policies.Hash == "" {
		return st, errors.New("no policy set hash in it")
	}
	return st, nil
}

func writeInstallReport(w io.Writer, rep *installReport, output string) error {
	if output == "json" || output == "yaml" {
		return writeMachineReport(w, rep, output)
	}
	w = textout.NewTextWriter(w) // names, reasons and messages come from the cluster and the files
	// A finding is one line: what the cluster or the status server says
	// (a served hash, a name, an error) cannot start a line of its own.
	esc := textout.EscapeControl
	for _, f := range rep.Findings {
		fmt.Fprintf(w, "%s: %s: %s\n", esc(f.Level), esc(f.Subject), esc(f.Message))
		if f.Fix != "" && f.Level != "ok" {
			fmt.Fprintf(w, "  fix: %s\n", esc(f.Fix))
		}
	}
	if rep.OK {
		fmt.Fprintln(w, "verdict: no errors")
	} else {
		fmt.Fprintln(w, "verdict: errors found")
	}
	return nil
}
