package check

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// statusServer serves body as the server's /status.
func statusServer(t *testing.T, body string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s
}

// servedReport runs the served-policies check against statusURL and returns
// the text report.
func servedReport(t *testing.T, statusURL string, set *policy.Set) string {
	t.Helper()
	rep := &installReport{}
	rep.servedPolicies(context.Background(), statusURL, set, "--policy p")
	rep.OK = rep.Findings[0].Level == "ok"
	var b strings.Builder
	if err := writeInstallReport(&b, rep, "text"); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestServedHashOnOneLine: the hash a status server serves is printed on
// its finding's line, its control characters escaped: a hostile server
// cannot start a line of its own ("[ok] ...") in the report.
func TestServedHashOnOneLine(t *testing.T) {
	set, err := policy.Load(testkit.Path("examples/policies/memory"))
	if err != nil {
		t.Fatal(err)
	}
	s := statusServer(t, `{"policies": {"hash": "abc\n[ok] fake line\r\u001b[2K"}}`)
	got := servedReport(t, s.URL+"/status", set)
	want := `error: served policies: the server serves policy set abc\x0a[ok] fake line\x0d\x1b[2K, but --policy p holds ` + set.Hash + `
  fix: the server has not reloaded: look at its /status for the rejected reload, or restart it
verdict: errors found
`
	if got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}

	ok := statusServer(t, `{"policies": {"hash": "`+set.Hash+`"}}`)
	if got, want := servedReport(t, ok.URL+"/status", set), "ok: served policies: the server serves policy set "+set.Hash+", as --policy p holds\nverdict: no errors\n"; got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
}

// TestStatusRedirects: --status-url's server may redirect on its own
// scheme, host and port, not elsewhere: the error says where it pointed.
func TestStatusRedirects(t *testing.T) {
	set, err := policy.Load(testkit.Path("examples/policies/memory"))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := statusServer(t, `{"policies": {"hash": "`+set.Hash+`"}}`)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/status", http.StatusFound)
		case "/status":
			_, _ = w.Write([]byte(`{"policies": {"hash": "` + set.Hash + `"}}`))
		default:
			http.Redirect(w, r, elsewhere.URL+"/status", http.StatusFound)
		}
	}))
	t.Cleanup(s.Close)

	if got, want := servedReport(t, s.URL+"/moved", set), "ok: served policies: the server serves policy set "+set.Hash+", as --policy p holds\nverdict: no errors\n"; got != want {
		t.Errorf("a redirect on the same host:\n%s\nwant:\n%s", got, want)
	}
	got := servedReport(t, s.URL+"/away", set)
	want := "error: served policies: reading " + s.URL + "/away: Get \"" + elsewhere.URL + "/status\": redirected to " + elsewhere.URL +
		"/status, off the scheme, host and port of --status-url (" + s.URL + "): not followed\nverdict: errors found\n"
	if got != want {
		t.Errorf("a redirect to another port:\n%s\nwant:\n%s", got, want)
	}
}

// TestPolicyProblemsOnOneLineEach: policies that do not load (from the
// release's ConfigMap, so from the cluster) are a finding per problem, each
// on one line, a newline in a policy's name escaped.
func TestPolicyProblemsOnOneLineEach(t *testing.T) {
	_, err := policy.Parse("ConfigMap sandbox-webhook/x-policies key p.yaml", []byte(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: "bad\n[ok] fake line"
spec:
  match: {namespaces: [a]}
  enforcment: strict
`))
	if err == nil {
		t.Fatal("the policy loads")
	}
	rep := &installReport{}
	rep.addPolicyError(err)
	var b strings.Builder
	if err := writeInstallReport(&b, rep, "text"); err != nil {
		t.Fatal(err)
	}
	want := `error: policies: ConfigMap sandbox-webhook/x-policies key p.yaml (bad\x0a[ok] fake line): spec.enforcment: Forbidden: unknown field; did you mean "enforcement"?
error: policies: ConfigMap sandbox-webhook/x-policies key p.yaml (bad\x0a[ok] fake line): metadata.name: Invalid value: "bad\n[ok] fake line": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')
verdict: errors found
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}
