package dryrun

import (
	"cmp"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/internal/preview"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// fleetSummary counts what dry-run did over the whole input, for -o summary:
// per policy how many pods it matched, changed and skipped and why, and what
// --check predicts. Its memory is bounded: reasons beyond maxReasons
// distinct ones are counted as "other".
type fleetSummary struct {
	policies []*policySummary
	byName   map[string]*policySummary

	pods, workloads, changed, passed, nestedLists, unknownNamespaces int
	podSkipped                                                       reasons
	// converted counts pods whose own memory-backed emptyDirs move to
	// disk (leak mitigation), and the volumes.
	convertedPods, convertedVolumes int
	rejected                        int
	rejectReasons                   reasons
	unknownFields                   int
	// noMemoryRequest counts pods given a headroom whose request is 0.
	noMemoryRequest int
}

type policySummary struct {
	name                       string
	matched, changed, shadowed int
	notMatched, skipped        reasons
	notMatchedN, skippedN      int
}

// reasons counts distinct reason texts, at most maxReasons of them.
type reasons map[string]int

const maxReasons = 1000

func (r reasons) add(reason string) {
	if _, ok := r[reason]; !ok && len(r) >= maxReasons {
		reason = "(other reasons)"
	}
	r[reason]++
}

// writeTop writes the 5 most frequent reasons, most frequent first, a line
// each after indent.
func (r reasons) writeTop(w *preview.ReportWriter, indent string) {
	keys := slices.SortedFunc(maps.Keys(r), func(a, b string) int {
		return cmp.Or(cmp.Compare(r[b], r[a]), strings.Compare(a, b))
	})
	for _, k := range keys[:min(5, len(keys))] {
		w.Line("%s%d× %s", indent, r[k], k)
	}
}

func newFleetSummary(set *policy.Set) *fleetSummary {
	s := &fleetSummary{byName: map[string]*policySummary{}, podSkipped: reasons{}, rejectReasons: reasons{}}
	for _, p := range set.Policies {
		ps := &policySummary{name: p.Name(), notMatched: reasons{}, skipped: reasons{}}
		s.policies = append(s.policies, ps)
		s.byName[p.Name()] = ps
	}
	return s
}

func (s *fleetSummary) reject(reason string) {
	s.rejected++
	s.rejectReasons.add(reason)
}

// add counts one pod (or workload's pod template) and its --check problems.
func (s *fleetSummary) add(p *preview.Pod, problems []string) {
	if strings.HasPrefix(p.Name, "Pod ") {
		s.pods++
	} else {
		s.workloads++
	}
	if p.Changed {
		s.changed++
	}
	if len(p.Unknown) > 0 {
		s.unknownFields++
	}
	r := p.Result
	if r.PodSkipped != "" {
		s.podSkipped.add(r.PodSkipped)
	}
	for _, pr := range r.Policies {
		ps := s.byName[pr.Policy]
		if ps == nil {
			continue
		}
		if !pr.Matched {
			ps.notMatchedN++
			ps.notMatched.add(pr.Reason.String())
			continue
		}
		ps.matched++
		if pr.Enforcement == policy.Shadow {
			ps.shadowed++
		}
	}
	changedBy := map[string]bool{}
	converted := 0
	for _, d := range r.Applied {
		if !d.Shadow {
			changedBy[d.Policy] = true
		}
		if strings.HasPrefix(d.Item, "convert/") && !d.Shadow {
			converted++
		}
	}
	for name := range changedBy {
		if ps := s.byName[name]; ps != nil {
			ps.changed++
		}
	}
	for _, d := range r.Skipped {
		if ps := s.byName[d.Policy]; ps != nil {
			ps.skippedN++
			ps.skipped.add(d.Item + ": " + d.Reason)
		}
	}
	if preview.NoMemoryRequest(r) {
		s.noMemoryRequest++
	}
	if converted > 0 {
		s.convertedPods++
		s.convertedVolumes += converted
	}
	if len(problems) > 0 {
		s.rejected++
		for _, pr := range problems {
			s.rejectReasons.add(pr)
		}
	}
}

// write prints the summary.
func (s *fleetSummary) write(w io.Writer, check bool) {
	r := preview.NewReportWriter(w)
	r.Line("objects: %d pods, %d workloads with a pod template, %d passed through unchanged (not a pod or a workload)", s.pods, s.workloads, s.passed)
	if s.nestedLists > 0 {
		r.Line("  %d Lists inside Lists (their items counted above)", s.nestedLists)
	}
	r.Line("changed: %d of %d", s.changed, s.pods+s.workloads)
	if len(s.podSkipped) > 0 {
		r.Line("skipped whole:")
		s.podSkipped.writeTop(r, "  ")
	}
	for _, ps := range s.policies {
		r.Line("policy %s: matched %d, changed %d, not matched %d, skipped items %d", ps.name, ps.matched, ps.changed, ps.notMatchedN, ps.skippedN)
		if ps.shadowed > 0 {
			r.Line("  shadow: %d matched pods computed, not patched", ps.shadowed)
		}
		if ps.notMatchedN > 0 {
			r.Line("  not matched, top reasons:")
			ps.notMatched.writeTop(r, "    ")
		}
		if ps.skippedN > 0 {
			r.Line("  skipped, top reasons:")
			ps.skipped.writeTop(r, "    ")
		}
	}
	if s.convertedPods > 0 {
		r.Line("leak mitigation: %d pods' own memory-backed emptyDirs (%d volumes) move to disk", s.convertedPods, s.convertedVolumes)
	}
	if s.noMemoryRequest > 0 {
		r.Line("memory: %d pods end with a pod-level memory request of 0 under the headroom: the scheduler counts no memory for them; set memory.request in the policy to what a sandbox uses", s.noMemoryRequest)
	}
	if s.unknownFields > 0 {
		r.Line("unknown fields: %d pods have fields the apiserver's strict decoding rejects", s.unknownFields)
	}
	if s.unknownNamespaces > 0 {
		r.Line("namespaces: %d not in --namespaces: their labels were not seen", s.unknownNamespaces)
	}
	if check {
		r.Line("--predict: %d would be rejected", s.rejected)
		s.rejectReasons.writeTop(r, "  ")
	}
}
