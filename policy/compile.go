package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-webhook/sandbox-webhook/internal/imageref"
)

// hashLen is the length of Policy.Hash and Set.Hash in hex characters.
const hashLen = 12

// compile defaults and validates sp and compiles what the mutation core
// needs (selectors, quantities, the content hash). source is recorded in
// Policy.Source. sp is not modified.
func compile(source string, sp SandboxPolicy) (*Policy, field.ErrorList) {
	// A JSON round trip deep-copies sp, so defaulting cannot write into
	// the caller's slices.
	raw, err := json.Marshal(sp)
	if err == nil {
		sp = SandboxPolicy{}
		err = json.Unmarshal(raw, &sp)
	}
	if err != nil {
		return nil, field.ErrorList{documentError(err.Error())}
	}
	setDefaults(&sp)
	if errs := validate(&sp); len(errs) > 0 {
		return nil, errs
	}
	canonical, err := json.Marshal(sp)
	if err != nil {
		return nil, field.ErrorList{documentError(err.Error())}
	}
	sum := sha256.Sum256(canonical)
	p := &Policy{
		SandboxPolicy: sp,
		Source:        source,
		Hash:          hex.EncodeToString(sum[:])[:hashLen],
		CacheSizes:    make([]*resource.Quantity, len(sp.Spec.Caches)),
	}

	// Validation has checked every selector and quantity; errors here would
	// be bugs in validate.
	var errs field.ErrorList
	selector := func(ls *metav1.LabelSelector, fld *field.Path) labels.Selector {
		if ls == nil {
			return nil
		}
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			errs = append(errs, field.InternalError(fld, err))
		}
		return s
	}
	quantity := func(s string, fld *field.Path) resource.Quantity {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			errs = append(errs, field.InternalError(fld, err))
		}
		return q
	}
	match := field.NewPath("spec", "match")
	p.NamespaceSelector = selector(sp.Spec.Match.NamespaceSelector, match.Child("namespaceSelector"))
	p.PodSelector = selector(sp.Spec.Match.PodSelector, match.Child("podSelector"))
	p.ExcludePodSelector = selector(sp.Spec.Match.ExcludePodSelector, match.Child("excludePodSelector"))
	for i, b := range sp.Spec.Match.Any {
		fld := match.Child("any").Index(i)
		p.Any = append(p.Any, Selectors{
			NamespaceSelector:  selector(b.NamespaceSelector, fld.Child("namespaceSelector")),
			PodSelector:        selector(b.PodSelector, fld.Child("podSelector")),
			ExcludePodSelector: selector(b.ExcludePodSelector, fld.Child("excludePodSelector")),
		})
	}
	for i, c := range sp.Spec.Caches {
		if c.SizeLimit != "" {
			q := quantity(c.SizeLimit, field.NewPath("spec", "caches").Index(i).Child("sizeLimit"))
			p.CacheSizes[i] = &q
		}
	}
	if m := sp.Spec.Memory; m != nil {
		p.MemoryLimit = quantity(m.Limit, field.NewPath("spec", "memory", "limit"))
		if m.Request != "" {
			p.MemoryRequest = quantity(m.Request, field.NewPath("spec", "memory", "request"))
		}
	}
	if s := sp.Spec.Shm; s != nil {
		q := quantity(s.SizeLimit, field.NewPath("spec", "shm", "sizeLimit"))
		p.ShmSize = &q
	}
	for _, m := range sp.Spec.ImageMirrors {
		p.Mirrors = append(p.Mirrors, imageref.Rule{From: m.From, To: m.To})
	}
	if d := sp.Spec.Disk; d != nil {
		p.DiskLimit = quantity(d.Limit, field.NewPath("spec", "disk", "limit"))
		p.DiskRequest = quantity(d.Request, field.NewPath("spec", "disk", "request"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// setDefaults fills in the documented defaults.
func setDefaults(sp *SandboxPolicy) {
	s := &sp.Spec
	s.Enforcement = cmp.Or(s.Enforcement, Enforce)
	s.Mode = cmp.Or(s.Mode, ModeMemory)
	if len(s.Containers.Include) == 0 {
		s.Containers.Include = []string{"*"}
	}
	if s.Containers.InitContainers == nil {
		s.Containers.InitContainers = new(true)
	}
	for i := range s.Env {
		if e := &s.Env[i]; e.Position == "" {
			e.OnConflict = cmp.Or(e.OnConflict, Keep)
		} else {
			e.Separator = cmp.Or(e.Separator, ":")
		}
	}
	if r := s.Runtime; r != nil {
		r.OnConflict = cmp.Or(r.OnConflict, Keep)
		for i := range r.Tolerations {
			r.Tolerations[i].Operator = cmp.Or(r.Tolerations[i].Operator, corev1.TolerationOpEqual)
		}
	}
	if s.Memory != nil && s.Memory.Level == "" {
		s.Memory.Level = LevelPod
	}
	if s.Shm != nil && s.Shm.Name == "" {
		s.Shm.Name = "dshm"
	}
	if s.Disk != nil && s.Disk.Request == "" {
		s.Disk.Request = s.Disk.Limit
	}
	for i := range s.Assets {
		if h := s.Assets[i].HostPath; h != nil && h.Type == "" {
			h.Type = "Directory"
		}
		if img := s.Assets[i].Image; img != nil && img.PullPolicy == "" {
			img.PullPolicy = "IfNotPresent"
		}
	}
}
