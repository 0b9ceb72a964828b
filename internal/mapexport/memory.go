package mapexport

import (
	"fmt"
)

// podMemory are the variables of pod-level memory.
type podMemory struct {
	// applied: the policy sets the pod-level memory (the pod does not set
	// its own, no earlier policy holds it).
	applied, write, limit, request, ownRequest string
}

// containerLevelMemory follows mutate's applier.containerMemory: unless an
// earlier policy holds the memory, every selected app container without a
// memory limit gets one, but not in a pod that sets its own pod-level memory
// (limit or request), which manages memory at the pod level: container
// limits added there could exceed its own.
func (b *block) containerLevelMemory() {
	claimed, why := b.claimed("memory", "memory")
	podOwn := b.def("podSetsMemory",
		"object.spec.?resources.?limits.?memory.orValue('') != '' || object.spec.?resources.?requests.?memory.orValue('') != ''")
	b.containerMemory = b.def("containerMemoryApplied", and(not(claimed), not(podOwn)))
	b.injected = append(b.injected, fmt.Sprintf("%s ? [%s] : []", b.containerMemory, jsonString("memory/containers")))
	skip := fmt.Sprintf("%s ? [%s] : []", podOwn, jsonString("memory/containers: the pod sets its own pod-level memory; kept"))
	if claimed != "false" {
		skip = fmt.Sprintf("%s ? [%s + %s + %s] : %s", claimed, opening("memory/containers: "), why, quote, skip)
	}
	b.skipped = append(b.skipped, skip)
}

// podMemory follows mutate's applier.memory: the pod-level limit is the
// headroom raised to the largest container limit and to the request; the
// request is the containers' effective request as the apiserver computes it
// (KEP-753: init containers, native sidecars, limits standing in for missing
// requests), at least the policy's minimum; the pod's own values are kept.
func (b *block) podMemory() {
	pd := b.pod
	claimed, why := b.claimed("memory", "memory")
	headroom, minimum := b.p.MemoryLimit, b.p.MemoryRequest
	hv, _ := headroom.AsInt64()
	mv, _ := minimum.AsInt64()

	lim := b.def("podLimit", "object.spec.?resources.?limits.?memory.orValue('')")
	req := b.def("podRequest", "object.spec.?resources.?requests.?memory.orValue('')")
	sameQ := func(a, b string) string {
		return fmt.Sprintf("isQuantity(%s) && quantity(%s).compareTo(quantity(%s)) == 0", b, a, b)
	}
	// Values an earlier pass set (recorded in the status annotation) are
	// recomputed; values the pod author set are kept.
	ours := b.def("memoryOurs", and(pd.prevMem, lim+" != ''", sameQ(lim, pd.prevLim),
		or(pd.prevReq+" == ''", and(req+" != ''", sameQ(req, pd.prevReq)))))
	kept := b.def("memoryKept", and(not(claimed), fmt.Sprintf("%s != '' && !%s", lim, ours)))
	ownReq := b.def("memoryOwnRequest", and(req+" != ''", or(not(ours), pd.prevReq+" == ''")))

	effective := "c.?resources.?requests.?memory.orValue(c.?resources.?limits.?memory.orValue(''))"
	initReqs := b.def("initRequests", fmt.Sprintf("%s.map(c, %s)", pd.inits, effective))
	initSide := b.def("initSidecar", fmt.Sprintf("%s.map(c, c.?restartPolicy.orValue('') == 'Always')", pd.inits))
	sidecars := func(n string) string {
		return fmt.Sprintf("lists.range(%s).filter(j, %s[j] && %s[j] != '').map(j, %s[j])", n, initSide, initReqs, initReqs)
	}
	// Each init container's requirement while it runs: its request plus
	// the sidecars started before it (a sidecar: the sidecars up to it).
	// Lists of quantities, summed later, so the sum's format can be that
	// of its first non-zero term, as resource.Quantity.Add keeps it.
	cands := b.def("initCandidates", fmt.Sprintf(
		"lists.range(size(%s)).map(i, %s[i] ? %s : (%s[i] != '' ? [%s[i]] : []) + %s).filter(l, size(l) > 0)",
		pd.inits, initSide, sidecars("i + 1"), initReqs, initReqs, sidecars("i")))
	sum := func(l string) string { return fmt.Sprintf("%s.map(s, quantity(s).asInteger()).sum()", l) }
	candVals := b.def("initCandidateValues", fmt.Sprintf("%s.map(l, %s)", cands, sum("l")))
	running := b.def("runningRequests", fmt.Sprintf("%s.map(c, %s).filter(s, s != '') + %s", pd.apps, effective, sidecars("size("+pd.inits+")")))
	winner := b.def("effectiveTerms", fmt.Sprintf(
		"size(%s) > 0 && (size(%s) == 0 || %s.max() > %s) ? %s[%s.indexOf(%s.max())] : %s",
		cands, running, candVals, sum(running), cands, candVals, candVals, running))
	aggVal := b.def("effectiveValue", sum(winner))
	nonZero := fmt.Sprintf("%s.filter(s, quantity(s).asInteger() != 0)", winner)
	aggStr := b.def("effectiveRequest", formatQuantity(aggVal,
		fmt.Sprintf("[%s].map(nz, size(nz) > 0 ? %s : 'bin')[0]", nonZero, quantityClass("nz[0]"))))

	reqVal, reqStr := aggVal, aggStr
	if mv > 0 {
		reqVal = fmt.Sprintf("(%d > %s ? %d : %s)", mv, aggVal, mv, aggVal)
		reqStr = fmt.Sprintf("(%d > %s ? %s : %s)", mv, aggVal, str(minimum.String()), aggStr)
	}
	reqVal = b.def("requestValue", fmt.Sprintf("%s ? quantity(%s).asInteger() : %s", ownReq, req, reqVal))
	reqStr = b.def("requestString", fmt.Sprintf("%s ? %s : %s", ownReq, b.def("podRequestCanonical", canonicalQuantity(req)), reqStr))
	limStrs := b.def("containerLimits", fmt.Sprintf("(%s + %s).map(c, c.?resources.?limits.?memory.orValue('')).filter(s, s != '')", pd.inits, pd.apps))
	limVals := b.def("containerLimitValues", fmt.Sprintf("%s.map(s, quantity(s).asInteger())", limStrs))
	maxLim := b.def("maxContainerLimit", fmt.Sprintf("size(%s) > 0 ? %s.max() : 0", limVals, limVals))
	maxLimStr := b.def("maxContainerLimitCanonical", canonicalQuantity(fmt.Sprintf("%s[%s.indexOf(%s)]", limStrs, limVals, maxLim)))
	lim1Val := fmt.Sprintf("(%s > %d ? %s : %d)", maxLim, hv, maxLim, hv)
	lim1Str := fmt.Sprintf("(%s > %d ? %s : %s)", maxLim, hv, maxLimStr, str(headroom.String()))
	limVal := b.def("limitValue", fmt.Sprintf("%s > %s ? %s : %s", reqVal, lim1Val, reqVal, lim1Val))
	limStr := b.def("limitString", fmt.Sprintf("%s > %s ? %s : %s", reqVal, lim1Val, reqStr, lim1Str))
	applied := and(not(claimed), not(kept))
	if applied != not(kept) {
		applied = b.def("memoryApplied", applied)
	}
	write := b.def("memoryWrite", and(applied, or(lim+" == ''", req+" == ''",
		fmt.Sprintf("quantity(%s).asInteger() != %s", lim, limVal), fmt.Sprintf("quantity(%s).asInteger() != %s", req, reqVal))))
	b.memory = &podMemory{applied: applied, write: write, limit: limStr, request: reqStr, ownRequest: ownReq}

	b.injected = append(b.injected, fmt.Sprintf("%s ? [%s] : []", applied, jsonString("memory/pod")))
	if claimed != "false" {
		b.skipped = append(b.skipped, fmt.Sprintf("%s ? [%s + %s + %s] : []", claimed, opening("memory/pod: "), why, quote))
	}
	b.skipped = append(b.skipped, fmt.Sprintf("%s ? [%s + %s + %s] : []",
		kept, opening("memory/pod: the pod sets its own pod-level memory limit ("), b.def("podLimitCanonical", canonicalQuantity(lim)), closing("); kept")))
}
