package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"

	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Sources of reloadable configuration, as named in metrics and /status.
const (
	sourcePolicies       = "policies"
	sourceLeakMitigation = "leak-mitigation"
)

// reloadDebounce lets a burst of file events (an editor's truncate and
// write, a ConfigMap's symlink swap) settle into one reload: the files are
// read once no event came for this long, and at the latest
// reloadDebounceMax after the first event of the burst, so that a file
// written without pause cannot hold a reload back.
const (
	reloadDebounce    = 100 * time.Millisecond
	reloadDebounceMax = time.Second
)

// reloader keeps the published admission.Config in step with the policy
// files and the leak-mitigation file. A valid change is swapped in as a
// whole new Config; an invalid one is logged with every problem, counted and
// shown on /status, and the last good Config keeps serving.
type reloader struct {
	log   logr.Logger
	paths []string
	// allowEmpty and allowedHostPaths are --allow-empty-policies and
	// --allowed-host-path.
	allowEmpty       bool
	allowedHostPaths []string
	leakFile         string
	exclude          []string
	statusAlways     bool
	interval         time.Duration
	target           *atomic.Pointer[admission.Config]
	metrics          *serverMetrics
	watcher          *fsnotify.Watcher // nil when file watching is unavailable

	mu       sync.Mutex
	policies sourceState
	leak     sourceState
	set      *policy.Set
	leakMode mutate.LeakMitigation
	cluster  clusterFeatures // what the apiserver does with pod-level resources and image volumes
}

// sourceState is what is known about one reloadable source: what /status
// shows of it, and the fingerprint of its files as last read ("" before the
// first read).
type sourceState struct {
	ReloadStatus
	fingerprint string
}

func newReloader(o *Options, target *atomic.Pointer[admission.Config], m *serverMetrics) *reloader {
	return &reloader{
		log:              o.Logger.WithName("reload"),
		paths:            slices.Clone(o.PolicyPaths),
		allowEmpty:       o.AllowEmptyPolicies,
		allowedHostPaths: slices.Clone(o.AllowedHostPaths),
		leakFile:         o.LeakMitigationFile,
		exclude:          slices.Clone(o.ExcludeNamespaces),
		statusAlways:     o.StatusAlways,
		interval:         o.ReloadInterval,
		target:           target,
		metrics:          m,
		leakMode:         o.LeakMitigation,
		policies:         sourceState{ReloadStatus: ReloadStatus{Paths: slices.Clone(o.PolicyPaths)}},
		leak:             sourceState{ReloadStatus: ReloadStatus{Paths: []string{o.LeakMitigationFile}}},
	}
}

// ready reports whether a Config has been published: the policies and, when
// configured, the leak-mitigation file have each loaded once.
func (r *reloader) ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var missing []string
	if !r.policies.Loaded {
		missing = append(missing, "policies ("+r.policies.describeError()+")")
	}
	if r.leakFile != "" && !r.leak.Loaded {
		missing = append(missing, "--leak-mitigation-file ("+r.leak.describeError()+")")
	}
	if len(missing) > 0 {
		return fmt.Errorf("not loaded yet: %s", strings.Join(missing, ", "))
	}
	return nil
}

func (s *sourceState) describeError() string {
	switch len(s.Errors) {
	case 0:
		return "not read yet"
	case 1:
		return s.Errors[0]
	}
	return s.Errors[0] + " (and more; see /status)"
}

// reload re-reads whatever changed since the last read and publishes a new
// Config when the effective policies or mode changed. A source whose files
// changed while they were read is left for the next reload, which it asks
// for by returning true: a set is only taken from files that held still.
func (r *reloader) reload() (unsettled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false

	if fp := fingerprint(r.paths); fp != r.policies.fingerprint {
		set, err := r.loadPolicies()
		if fingerprint(r.paths) != fp {
			r.log.V(1).Info("Policy files changed while being read; reading them again", "paths", r.paths)
			return true
		}
		r.policies.fingerprint = fp
		switch {
		case err != nil && r.set == nil:
			r.failed(&r.policies, sourcePolicies, err, "Policies are invalid; not ready until they are fixed", "paths", r.paths)
		case err != nil:
			r.failed(&r.policies, sourcePolicies, err, "Policies are invalid; the last good set keeps serving",
				"paths", r.paths, "serving", r.set.Hash)
		default:
			r.succeeded(&r.policies, sourcePolicies)
			r.policies.Loaded = true
			if r.set == nil || set.Hash != r.set.Hash {
				r.log.Info("Loaded policies", "hash", set.Hash, "policies", policyNames(set), "previous", setHash(r.set))
				r.set = set
				changed = true
			}
		}
	}

	if r.leakFile != "" {
		if fp := fingerprint([]string{r.leakFile}); fp != r.leak.fingerprint {
			mode, err := readLeakMitigation(r.leakFile)
			if fingerprint([]string{r.leakFile}) != fp {
				r.log.V(1).Info("The leak-mitigation file changed while being read; reading it again", "file", r.leakFile)
				return true
			}
			r.leak.fingerprint = fp
			switch {
			case err != nil && !r.leak.Loaded:
				r.failed(&r.leak, sourceLeakMitigation, err, "The leak-mitigation file is invalid; not ready until it is fixed", "file", r.leakFile)
			case err != nil:
				r.failed(&r.leak, sourceLeakMitigation, err, "The leak-mitigation file is invalid; the last good mode keeps serving",
					"file", r.leakFile, "serving", r.leakMode)
			default:
				r.succeeded(&r.leak, sourceLeakMitigation)
				first := !r.leak.Loaded
				r.leak.Loaded = true
				if first || mode != r.leakMode {
					r.log.Info("Loaded leak mitigation", "mode", mode, "file", r.leakFile, "previous", r.leakMode)
					changed = changed || mode != r.leakMode
					r.leakMode = mode
				}
			}
		}
	}

	if r.set == nil || (r.leakFile != "" && !r.leak.Loaded) {
		return false
	}
	if changed || r.target.Load() == nil {
		r.publish()
	}
	return false
}

// setCluster records what the apiserver does with pod-level resources and
// image volumes and publishes a new Config when that changed and a Config
// is serving.
func (r *reloader) setCluster(f clusterFeatures) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f == r.cluster {
		return
	}
	r.cluster = f
	if r.target.Load() != nil {
		r.publish()
	}
}

// affected names the serving policies that ask for what a cluster may
// drop: memory.level pod (podLevel) and assets with an image source
// (imageVolumes). They inject no headroom, or may not mount the asset,
// where the apiserver drops that.
func (r *reloader) affected(podLevel, imageVolumes bool) (byPodLevel, byImageVolumes []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil {
		return nil, nil
	}
	for _, p := range r.set.Policies {
		if m := p.Spec.Memory; podLevel && m != nil && m.Level == policy.LevelPod {
			byPodLevel = append(byPodLevel, p.Name())
		}
		if imageVolumes && slices.ContainsFunc(p.Spec.Assets, func(a policy.Asset) bool { return a.Image != nil }) {
			byImageVolumes = append(byImageVolumes, p.Name())
		}
	}
	return byPodLevel, byImageVolumes
}

// publish swaps in a new Config. Callers hold r.mu.
func (r *reloader) publish() {
	cfg := &admission.Config{
		Policies: r.set,
		Options: mutate.Options{
			LeakMitigation:    r.leakMode,
			ExcludeNamespaces: slices.Clone(r.exclude),
			PodLevelResources: r.cluster.podLevel,
			ImageVolumes:      r.cluster.imageVolumes,
			StatusAlways:      r.statusAlways,
		},
	}
	r.target.Store(cfg)
	r.metrics.setConfig(cfg)
}

func (r *reloader) succeeded(s *sourceState, source string) {
	s.LastSuccess = time.Now()
	s.Errors = nil
	r.metrics.reloaded(source, nil)
}

func (r *reloader) failed(s *sourceState, source string, err error, msg string, kv ...any) {
	s.Errors = strings.Split(err.Error(), "\n")
	s.LastErrorTime = time.Now()
	r.metrics.reloaded(source, err)
	// Every problem, one per entry, so that no error is lost to truncation.
	r.log.Error(err, msg, append(kv, "problems", s.Errors)...)
}

// start sets up the file watches and reads the files once. The watches come
// first, so that no change after the read goes unnoticed.
func (r *reloader) start() {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.log.Error(err, "File watching is unavailable; relying on the periodic re-check", "interval", r.interval)
	} else {
		r.watcher = w
		r.watch(w)
	}
	r.reload()
}

// stop releases the file watches of a reloader that will not run.
func (r *reloader) stop() {
	if r.watcher != nil {
		_ = r.watcher.Close()
	}
}

// run re-reads on relevant file events and every interval, until ctx ends.
// start must have been called.
//
// Only events on the files the sources are read from count (and a
// ConfigMap's ..data swap); anything else written in a watched directory, a
// log file say, is dropped without a word, so that it can neither hold
// reloads back nor, by being logged, feed itself.
func (r *reloader) run(ctx context.Context) error {
	w := r.watcher
	var events <-chan fsnotify.Event
	var werrs <-chan error
	if w != nil {
		defer w.Close()
		events, werrs = w.Events, w.Errors
	}
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	d := newDebouncer(reloadDebounce, reloadDebounceMax)
	defer d.stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if r.relevant(ev.Name) {
				d.event(time.Now())
			}
		case err, ok := <-werrs:
			if !ok {
				werrs = nil
				continue
			}
			r.log.Error(err, "File watch error; the periodic re-check still runs")
		case <-d.fire():
			d.fired()
			if r.reload() {
				d.event(time.Now())
			}
		case <-tick.C:
			if w != nil {
				// A watched directory that was itself replaced (a
				// symlinked mount swapped underneath) needs a new watch.
				r.watch(w)
			}
			if r.reload() {
				d.event(time.Now())
			}
		}
	}
}

// relevant reports whether a file event on name can change what the sources
// read: a policy file (as the loader picks them in a directory), the
// leak-mitigation file, or a ConfigMap's ..data symlink being swapped.
func (r *reloader) relevant(name string) bool {
	name = filepath.Clean(name)
	dir, base := filepath.Split(name)
	dir = filepath.Clean(dir)
	if base == "..data" {
		return true
	}
	if r.leakFile != "" && name == filepath.Clean(r.leakFile) {
		return true
	}
	for _, p := range r.paths {
		p = filepath.Clean(p)
		if name == p || (dir == p && policy.IsPolicyFileName(base)) {
			return true
		}
	}
	return false
}

// debouncer turns a stream of events into reloads: it fires once no event
// came for quiet, and at the latest max after the first event it has not
// fired for yet.
type debouncer struct {
	quiet, max time.Duration
	timer      *time.Timer
	deadline   time.Time // of the pending burst; zero when there is none
}

func newDebouncer(quiet, max time.Duration) *debouncer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &debouncer{quiet: quiet, max: max, timer: t}
}

// event records an event at now.
func (d *debouncer) event(now time.Time) {
	if d.deadline.IsZero() {
		d.deadline = now.Add(d.max)
	}
	d.timer.Reset(min(d.quiet, d.deadline.Sub(now)))
}

func (d *debouncer) fire() <-chan time.Time { return d.timer.C }

// fired ends the burst.
func (d *debouncer) fired() { d.deadline = time.Time{} }

func (d *debouncer) stop() { d.timer.Stop() }

// watch adds watches on the directories holding the sources: a directory
// path itself, the parent of a file path. Events there cover edits, new
// files and a ConfigMap's ..data symlink swap; relevant picks the ones
// that matter.
func (r *reloader) watch(w *fsnotify.Watcher) {
	dirs := map[string]bool{}
	for _, p := range append(slices.Clone(r.paths), r.leakFile) {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			dirs[p] = true
		} else {
			dirs[filepath.Dir(p)] = true
		}
	}
	for d := range dirs {
		if slices.Contains(w.WatchList(), d) {
			continue
		}
		if err := w.Add(d); err != nil {
			r.log.V(1).Info("Cannot watch directory yet; the periodic re-check covers it", "dir", d, "error", err.Error())
		}
	}
}

// status is what /status shows about the reloadable configuration.
func (r *reloader) status() (policies PolicyStatus, leak LeakMitigationStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	policies = PolicyStatus{
		ReloadStatus: r.policies.ReloadStatus,
	}
	if r.set != nil {
		policies.Hash = r.set.Hash
		for _, p := range r.set.Policies {
			policies.Policies = append(policies.Policies, PolicyInfo{
				Name:        p.Name(),
				Hash:        p.Hash,
				Source:      p.Source,
				Enforcement: string(p.Spec.Enforcement),
				Mode:        string(p.Spec.Mode),
			})
		}
	}
	leak = LeakMitigationStatus{Mode: string(r.leakMode), From: "--leak-mitigation"}
	if r.leakFile != "" {
		rs := r.leak.ReloadStatus
		leak.File = &rs
		if r.leak.Loaded {
			leak.From = "--leak-mitigation-file"
		}
	}
	return policies, leak
}

// readLeakMitigation reads a file holding on, off or policy.
func readLeakMitigation(path string) (mutate.LeakMitigation, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "", fmt.Errorf("%s is empty; it must hold on, off or policy", path)
	}
	mode, ok := mutate.ParseLeakMitigation(s)
	if !ok {
		return "", fmt.Errorf("%s holds %.64q; it must hold on, off or policy", path, s)
	}
	return mode, nil
}

// fingerprint identifies the current contents of paths the way the policy
// loader sees them: exactly the files policy.Files lists for each path
// (following symlinks), by name and content. An unreadable path
// contributes its error, so that it changes when the path appears.
func fingerprint(paths []string) string {
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "path %s\n", p)
		files, err := policy.Files(p)
		if err != nil {
			fmt.Fprintf(h, "error %v\n", errors.Unwrap(err))
			continue
		}
		for _, f := range files {
			fmt.Fprintf(h, "file %s\n", f)
			hashFile(h, f)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func hashFile(h io.Writer, path string) {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(h, "error %v\n", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		fmt.Fprintf(h, "error %v\n", err)
	}
	fmt.Fprintln(h)
}

func setHash(s *policy.Set) string {
	if s == nil {
		return ""
	}
	return s.Hash
}

func policyNames(s *policy.Set) []string {
	names := make([]string, len(s.Policies))
	for i, p := range s.Policies {
		names[i] = p.Name()
	}
	return names
}

// loadPolicies reads the policy set: policy.Load, which refuses an empty
// set, or policy.LoadAllowEmpty with --allow-empty-policies; a set with a
// hostPath asset outside the --allowed-host-path directories is refused.
func (r *reloader) loadPolicies() (*policy.Set, error) {
	load := policy.Load
	if r.allowEmpty {
		load = policy.LoadAllowEmpty
	}
	set, err := load(r.paths...)
	if err == nil {
		err = policy.AllowHostPaths(set, r.allowedHostPaths)
	}
	return set, err
}
