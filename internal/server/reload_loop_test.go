package server

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestUnrelatedWritesNeitherStarveNorFeedReloads lays files out as the demo
// did: the server's debug log is written into the directory that holds the
// watched leak-mitigation file, and something else keeps writing there too.
// On a real file system, with that stream running, a change of the
// leak-mitigation file must still reach the served config within a bound
// derived from the debounce's maximum delay (the periodic re-read is an
// hour away here), and the log must not grow with the unrelated writes nor
// keep growing by itself once they stop.
func TestUnrelatedWritesNeitherStarveNorFeedReloads(t *testing.T) {
	dir := t.TempDir()
	policyDir := filepath.Join(dir, "policies")
	writeFile(t, filepath.Join(policyDir, "seed.yaml"), policyYAML("a"))
	leak := filepath.Join(dir, "leak-mitigation")
	writeFile(t, leak, "policy\n")
	logFile, err := os.Create(filepath.Join(dir, "webhook.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	log, err := NewLogger("debug", logFile)
	if err != nil {
		t.Fatal(err)
	}

	var config atomic.Pointer[admission.Config]
	o := &Options{
		PolicyPaths:        []string{policyDir},
		LeakMitigation:     mutate.LeakMitigationPolicy,
		LeakMitigationFile: leak,
		ReloadInterval:     time.Hour,
		Logger:             log,
	}
	r := newReloader(o, &config, newServerMetrics(prometheus.NewRegistry()))
	r.start()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	if c := config.Load(); c == nil || c.Options.LeakMitigation != mutate.LeakMitigationPolicy {
		t.Fatalf("after start: %+v", c)
	}
	logSize := func() int64 {
		st, err := logFile.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	startSize := logSize()

	// A steady stream of unrelated writes, as fast as the file system
	// takes them: a log line every iteration, and now and then a new file.
	stop := make(chan struct{})
	var writes atomic.Int64
	var writer sync.WaitGroup
	writer.Go(func() {
		f, err := os.Create(filepath.Join(dir, "other.log"))
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := fmt.Fprintf(f, "line %d\n", i); err != nil {
				t.Error(err)
				return
			}
			if i%100 == 0 {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rotated-%d.txt", i%1000)), []byte("x"), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
			writes.Add(1)
			time.Sleep(100 * time.Microsecond)
		}
	})
	time.Sleep(3 * reloadDebounce) // the stream is under way

	bound := 10 * reloadDebounceMax
	began := time.Now()
	writeFile(t, leak, "on\n")
	for {
		if c := config.Load(); c != nil && c.Options.LeakMitigation == mutate.LeakMitigationOn {
			break
		}
		if time.Since(began) > bound {
			close(stop)
			writer.Wait()
			t.Fatalf("leak-mitigation on did not reach the config within %v (10× the debounce's maximum delay) during %d unrelated writes",
				bound, writes.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(began)
	time.Sleep(2 * reloadDebounceMax) // more of the stream
	close(stop)
	writer.Wait()
	t.Logf("leak-mitigation on served %v after the write, during %d unrelated writes", took, writes.Load())

	// Only the reload itself is logged: one line, whatever the stream did.
	grown := logSize() - startSize
	if grown > 1024 {
		t.Errorf("the log grew by %d bytes during %d unrelated writes; want only the reload's line:\n%s", grown, writes.Load(), head(t, logFile.Name()))
	}
	// And nothing feeds itself once the stream has stopped.
	settled := logSize()
	time.Sleep(5 * reloadDebounceMax)
	if after := logSize(); after != settled {
		t.Errorf("the log keeps growing with nothing else writing: %d → %d bytes:\n%s", settled, after, head(t, logFile.Name()))
	}
}

// head is the first lines of a file, for failure messages.
func head(t *testing.T, path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfterN(raw, []byte("\n"), 6)
	return string(bytes.Join(lines[:min(5, len(lines))], nil))
}

// TestDebouncer: events closer together than quiet are one reload, fired
// quiet after the last, but never later than max after the first.
func TestDebouncer(t *testing.T) {
	d := newDebouncer(100*time.Millisecond, time.Second)
	defer d.stop()
	start := time.Now()
	// An event every 10ms, for longer than max: the reload must fire at
	// max, not wait for the events to stop.
	for time.Since(start) < 10*time.Second {
		d.event(time.Now())
		select {
		case <-d.fire():
			d.fired()
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("fired after %v of continuous events; want about the 1s maximum", took)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("never fired during 10s of continuous events")
}

// TestInvalidAtStartSaysNotReady: with no good set yet, an invalid or empty
// one is reported as what it is, not ready, rather than as a last good set
// that does not exist; with --allow-empty-policies an empty set serves.
func TestInvalidAtStartSaysNotReady(t *testing.T) {
	for _, tt := range []struct {
		name, content string
		allowEmpty    bool
		ready         bool
		logs          string
	}{
		{name: "invalid", content: strings.Replace(policyYAML("a"), "sizeLimit: 1Gi", "sizeLimit: 1 Gi", 1),
			logs: `"msg":"Policies are invalid; not ready until they are fixed"`},
		{name: "empty", content: "",
			logs: `"msg":"Policies are invalid; not ready until they are fixed"`},
		{name: "empty allowed", content: "", allowEmpty: true, ready: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "seed.yaml"), tt.content)
			var logs bytes.Buffer
			log, err := NewLogger("debug", &logs)
			if err != nil {
				t.Fatal(err)
			}
			o := &Options{PolicyPaths: []string{dir}, AllowEmptyPolicies: tt.allowEmpty, Logger: log, RESTConfig: &rest.Config{}, CertDir: "x", Port: 1}
			if err := o.complete(); err != nil {
				t.Fatal(err)
			}
			var config atomic.Pointer[admission.Config]
			r := newReloader(o, &config, newServerMetrics(prometheus.NewRegistry()))
			r.start()
			r.stop()
			err = r.ready()
			if tt.ready != (err == nil) || tt.ready != (config.Load() != nil) {
				t.Errorf("ready() = %v, config published %v; want ready %v", err, config.Load() != nil, tt.ready)
			}
			if !strings.Contains(logs.String(), tt.logs) {
				t.Errorf("logs lack %s:\n%s", tt.logs, logs.String())
			}
			if strings.Contains(logs.String(), "last good") {
				t.Errorf("logs speak of a last good set there is none of:\n%s", logs.String())
			}
		})
	}
}
