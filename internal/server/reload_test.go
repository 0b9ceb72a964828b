package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

func TestPolicyReload(t *testing.T) {
	e := newTestEnv(t, nil)
	e.start(nil)
	e.waitReady()
	first := e.status().Policies.Hash
	if m := e.marker(e.client); m != "a" {
		t.Fatalf("MARKER = %q", m)
	}

	// A valid change is swapped in.
	writeFile(t, filepath.Join(e.policyDir, "seed.yaml"), policyYAML("b"))
	testkit.WaitFor(t, "the new policy set", time.Minute, testkit.Holds(func() bool { return e.status().Policies.Hash != first }))
	if m := e.marker(e.client); m != "b" {
		t.Errorf("after a valid change MARKER = %q, want b", m)
	}
	second := e.status().Policies.Hash
	if got := e.metric("sandbox_webhook_policy_set_info", "hash="+second); got != 1 {
		t.Errorf("policy_set_info for the new hash = %v", got)
	}
	if got, err := testkit.Metric(e.metrics(), "sandbox_webhook_policy_set_info", "hash="+first); !errors.Is(err, testkit.ErrNoSeries) {
		t.Errorf("policy_set_info still shows the old hash (%v, %v)", got, err)
	}
	if got := e.metric("sandbox_webhook_policy_reloads_total", "source=policies"); got != 2 {
		t.Errorf("reloads = %v, want 2", got)
	}

	// An invalid change is rejected, visibly, and the last good set serves.
	writeFile(t, filepath.Join(e.policyDir, "seed.yaml"), strings.Replace(policyYAML("c"), "sizeLimit: 1Gi", "sizeLimit: 1 Gi", 1))
	writeFile(t, filepath.Join(e.policyDir, "other.yaml"), "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicy\nmetadata: {name: other}\nspec: {mode: tmpfs}\n")
	testkit.WaitFor(t, "the rejected reload on /status", time.Minute, testkit.Holds(func() bool { return len(e.status().Policies.Errors) >= 2 }))
	st := e.status()
	if !st.Ready || st.Policies.Hash != second || !st.Policies.Loaded {
		t.Errorf("after an invalid change /status = %+v", st)
	}
	joined := strings.Join(st.Policies.Errors, "\n")
	for _, want := range []string{"seed.yaml", "spec.caches[0].sizeLimit", "other.yaml", "spec.mode"} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors lack %q:\n%s", want, joined)
		}
	}
	if code, _ := e.get(e.healthURL + "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d while the last good set serves", code)
	}
	if m := e.marker(e.client); m != "b" {
		t.Errorf("after an invalid change MARKER = %q, want the last good b", m)
	}
	if got := e.metric("sandbox_webhook_policy_reload_errors_total", "source=policies"); got < 1 {
		t.Errorf("reload errors = %v", got)
	}
	if got := e.metric("sandbox_webhook_policy_reload_last_success", "source=policies"); got != 0 {
		t.Errorf("last_success = %v, want 0", got)
	}

	// Fixed again: errors clear.
	if err := os.Remove(filepath.Join(e.policyDir, "other.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.policyDir, "seed.yaml"), policyYAML("d"))
	testkit.WaitFor(t, "the fixed set", time.Minute, testkit.Holds(func() bool { st := e.status(); return len(st.Policies.Errors) == 0 && st.Policies.Hash != second }))
	if m := e.marker(e.client); m != "d" {
		t.Errorf("MARKER = %q, want d", m)
	}
	if got := e.metric("sandbox_webhook_policy_reload_last_success", "source=policies"); got != 1 {
		t.Errorf("last_success = %v, want 1", got)
	}
}

// TestAllowedHostPaths: with --allowed-host-path, a policy set with a
// hostPath asset outside the allowed directories is refused like any invalid
// set: the error names the file, the field and the allowed directories, and
// the last good set keeps serving.
func TestAllowedHostPaths(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.AllowedHostPaths = []string{"/mnt/shared"} })
	asset := func(marker, path string) string {
		return policyYAML(marker) + "  assets:\n    - name: data\n      mountPath: /opt/data\n      hostPath:\n        path: " + path + "\n"
	}
	writeFile(t, filepath.Join(e.policyDir, "seed.yaml"), asset("a", "/mnt/shared/data"))
	e.start(nil)
	e.waitReady()
	if m := e.marker(e.client); m != "a" {
		t.Fatalf("MARKER = %q", m)
	}
	good := e.status().Policies.Hash

	writeFile(t, filepath.Join(e.policyDir, "seed.yaml"), asset("b", "/data/elsewhere"))
	testkit.WaitFor(t, "the rejected reload on /status", time.Minute, testkit.Holds(func() bool { return len(e.status().Policies.Errors) > 0 }))
	st := e.status()
	want := `seed.yaml (seed): spec.assets[0].hostPath.path: Invalid value: "/data/elsewhere": must lie under an --allowed-host-path: /mnt/shared`
	if joined := strings.Join(st.Policies.Errors, "\n"); !strings.Contains(joined, want) {
		t.Errorf("errors lack %q:\n%s", want, joined)
	}
	if st.Policies.Hash != good {
		t.Errorf("policy set hash %s, want the last good %s", st.Policies.Hash, good)
	}
	if m := e.marker(e.client); m != "a" {
		t.Errorf("MARKER = %q, want the last good a", m)
	}
}

// TestConfigMapSwap updates a directory the way the kubelet updates a
// mounted ConfigMap: the files are symlinks through ..data, and an update
// swaps ..data to a new timestamped directory. Only file events trigger
// reloads here (the periodic re-check is an hour).
func TestConfigMapSwap(t *testing.T) {
	e := newTestEnv(t, nil)
	mount := filepath.Join(t.TempDir(), "policies")
	swap := func(version, content, leak string) {
		dir := filepath.Join(mount, "..2026_"+version)
		writeFile(t, filepath.Join(dir, "seed.yaml"), content)
		writeFile(t, filepath.Join(dir, "leakMitigation"), leak)
		tmp := filepath.Join(mount, "..data_tmp")
		if err := os.Symlink("..2026_"+version, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"seed.yaml", "leakMitigation"} {
			link := filepath.Join(mount, name)
			if _, err := os.Lstat(link); os.IsNotExist(err) {
				if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	swap("1", policyYAML("one"), "off")
	e.opts.PolicyPaths = []string{mount}
	e.opts.LeakMitigationFile = filepath.Join(mount, "leakMitigation")
	e.start(nil)
	e.waitReady()
	if m := e.marker(e.client); m != "one" {
		t.Fatalf("MARKER = %q", m)
	}
	if st := e.status(); st.LeakMitigation.Mode != "off" || st.LeakMitigation.From != "--leak-mitigation-file" {
		t.Errorf("leak mitigation = %+v", st.LeakMitigation)
	}

	swap("2", policyYAML("two"), "on")
	testkit.WaitFor(t, "the swapped ConfigMap", time.Minute, testkit.Holds(func() bool {
		st := e.status()
		return st.LeakMitigation.Mode == "on" && e.marker(e.client) == "two"
	}))
	res, err := e.admit(e.client, reviewFor(t, "x", "sandboxes", sandboxPodJSON))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.review.Response.Patch), `"medium":"Memory"`) {
		t.Errorf("leak mitigation on, but the cache is on tmpfs: %s", res.review.Response.Patch)
	}
	if got := e.metric("sandbox_webhook_leak_mitigation_info", "mode=on"); got != 1 {
		t.Errorf("leak_mitigation_info{on} = %v", got)
	}
}

func TestLeakMitigationFileReload(t *testing.T) {
	e := newTestEnv(t, nil)
	leak := filepath.Join(t.TempDir(), "leak")
	writeFile(t, leak, "on\n")
	e.opts.LeakMitigationFile = leak
	e.opts.LeakMitigation = mutate.LeakMitigationOff // the file wins
	e.start(nil)
	e.waitReady()
	if st := e.status(); st.LeakMitigation.Mode != "on" {
		t.Fatalf("mode = %q", st.LeakMitigation.Mode)
	}

	writeFile(t, leak, "sideways")
	testkit.WaitFor(t, "the rejected leak-mitigation file", time.Minute, testkit.Holds(func() bool {
		f := e.status().LeakMitigation.File
		return f != nil && len(f.Errors) == 1
	}))
	st := e.status()
	if st.LeakMitigation.Mode != "on" || !st.Ready || !strings.Contains(st.LeakMitigation.File.Errors[0], `holds "sideways"`) {
		t.Errorf("after an invalid file: %+v ready=%v", st.LeakMitigation, st.Ready)
	}
	if got := e.metric("sandbox_webhook_policy_reload_errors_total", "source=leak-mitigation"); got != 1 {
		t.Errorf("leak-mitigation reload errors = %v", got)
	}

	writeFile(t, leak, "policy")
	testkit.WaitFor(t, "mode policy", time.Minute, testkit.Holds(func() bool { return e.status().LeakMitigation.Mode == "policy" }))
}

func TestLeakMitigationFileMissingAtStart(t *testing.T) {
	e := newTestEnv(t, nil)
	leak := filepath.Join(t.TempDir(), "leak")
	e.opts.LeakMitigationFile = leak
	e.start(nil)
	testkit.WaitFor(t, "/status", time.Minute, testkit.Holds(func() bool { code, _ := e.get(e.healthURL + "/status"); return code == http.StatusOK }))
	st := e.status()
	if st.Ready || st.Checks[checkPolicies] == "ok" || !strings.Contains(st.Checks[checkPolicies], "--leak-mitigation-file") {
		t.Errorf("ready without the leak-mitigation file: %+v", st)
	}
	writeFile(t, leak, "off")
	e.waitReady()
	if st := e.status(); st.LeakMitigation.Mode != "off" {
		t.Errorf("mode = %q", st.LeakMitigation.Mode)
	}
}

// TestReloadsNeverMix admits pods while the policy file and the reloader
// swap between two versions many times. Each version sets several fields;
// every answer must carry one version's fields only.
func TestReloadsNeverMix(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "seed.yaml")
	version := func(v string) string {
		size := map[string]string{"a": "1Gi", "b": "2Gi"}[v]
		limit := map[string]string{"a": "8Gi", "b": "16Gi"}[v]
		return strings.NewReplacer("sizeLimit: 1Gi", "sizeLimit: "+size, "limit: 8Gi", "limit: "+limit).Replace(policyYAML(v))
	}
	writeFile(t, file, version("a"))
	var config atomic.Pointer[admission.Config]
	o := &Options{PolicyPaths: []string{dir}, LeakMitigation: mutate.LeakMitigationPolicy, Logger: logr.Discard()}
	reg := prometheus.NewRegistry()
	r := newReloader(o, &config, newServerMetrics(reg))
	r.reload()
	if config.Load() == nil {
		t.Fatal("nothing published")
	}
	lookup := func(context.Context, string) (mutate.Namespace, bool) {
		return mutate.Namespace{Name: "sandboxes"}, true
	}
	webhook := admission.NewHandler(&config, lookup, admission.NewMetrics(reg), logr.Discard()).Webhook()
	body := reviewFor(t, "u", "sandboxes", sandboxPodJSON)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var reloads atomic.Int64
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := file + ".tmp"
			if os.WriteFile(tmp, []byte(version([]string{"b", "a"}[i%2])), 0o644) != nil || os.Rename(tmp, file) != nil {
				return
			}
			r.reload()
			reloads.Add(1)
		}
	})
	const workers, perWorker = 6, 150
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for range perWorker {
				r := httptest.NewRequest(http.MethodPost, admission.Path, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				webhook.ServeHTTP(w, r)
				var answer admissionv1.AdmissionReview
				if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || answer.Response == nil {
					errs <- fmt.Errorf("not an AdmissionReview answer: %s", w.Body.String())
					return
				}
				if err := oneVersion(answer.Response.Patch); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	if reloads.Load() < 2 {
		t.Errorf("only %d reloads", reloads.Load())
	}
	t.Logf("%d reloads", reloads.Load())
}

// oneVersion checks that a patch is all version a or all version b.
func oneVersion(patch []byte) error {
	marker, err := patchMarker(patch)
	if err != nil {
		return err
	}
	var ops []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return err
	}
	var size, limit string
	for _, op := range ops {
		switch {
		case strings.HasPrefix(op.Path, "/spec/volumes"):
			var vols []corev1.Volume
			var vol corev1.Volume
			if json.Unmarshal(op.Value, &vols) != nil {
				if json.Unmarshal(op.Value, &vol) == nil {
					vols = []corev1.Volume{vol}
				}
			}
			for _, v := range vols {
				if v.Name == "uv-cache" && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
					size = v.EmptyDir.SizeLimit.String()
				}
			}
		case op.Path == "/spec/resources":
			var rr corev1.ResourceRequirements
			if json.Unmarshal(op.Value, &rr) == nil {
				limit = rr.Limits.Memory().String()
			}
		}
	}
	want := map[string][2]string{"a": {"1Gi", "8Gi"}, "b": {"2Gi", "16Gi"}}[marker]
	if size != want[0] || limit != want[1] {
		return fmt.Errorf("mixed answer: MARKER=%s sizeLimit=%s limit=%s; patch %s", marker, size, limit, patch)
	}
	return nil
}

// TestReadLeakMitigation: the file holds on, off or policy around white
// space; anything else is an error that quotes at most 64 characters of it.
func TestReadLeakMitigation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leak-mitigation")
	for content, want := range map[string]string{
		" on\n":                            "on",
		"off":                              "off",
		"policy\n":                         "policy",
		"\n":                               path + " is empty; it must hold on, off or policy",
		"sideways\n":                       path + ` holds "sideways"; it must hold on, off or policy`,
		strings.Repeat("é", 65):            path + ` holds "` + strings.Repeat("é", 64) + `"; it must hold on, off or policy`,
		"on\x00" + strings.Repeat("x", 99): path + ` holds "on\x00` + strings.Repeat("x", 61) + `"; it must hold on, off or policy`,
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		mode, err := readLeakMitigation(path)
		got := string(mode)
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%q: %s, want %s", content, got, want)
		}
	}
}

// TestFingerprintIsWhatTheLoaderReads: the reloader's fingerprint changes
// with the files policy.Load reads (policy.Files) and with nothing else in
// the directory.
func TestFingerprintIsWhatTheLoaderReads(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) { writeFile(t, filepath.Join(dir, name), content) }
	write("a.yaml", "a")
	fp := fingerprint([]string{dir})
	for _, name := range []string{"notes.txt", ".hidden.yaml", "sub/b.yaml", "a.yaml.bak"} {
		write(name, "not read")
		if got := fingerprint([]string{dir}); got != fp {
			t.Errorf("writing %s, which the loader does not read, changed the fingerprint", name)
		}
	}
	for _, name := range []string{"a.yaml", "c.JSON", "d.yml"} {
		write(name, "read")
		got := fingerprint([]string{dir})
		if got == fp {
			t.Errorf("writing %s, which the loader reads, left the fingerprint", name)
		}
		fp = got
	}
}
