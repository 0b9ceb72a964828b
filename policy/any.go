package policy

import "k8s.io/apimachinery/pkg/util/validation/field"

// validateAny checks the blocks of match.any: each must say what it is for,
// as a whole match must, and hold valid globs and selectors.
func validateAny(blocks []MatchBlock, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, b := range blocks {
		fld := fld.Index(i)
		if len(b.Namespaces) == 0 && b.NamespaceSelector == nil && b.PodSelector == nil {
			errs = append(errs, field.Required(fld, "each block must say what it selects: set namespaces, namespaceSelector and/or podSelector"))
		}
		errs = append(errs, b.validateSelection(fld)...)
	}
	return errs
}

// validateSelection checks the globs and label selectors that a block
// (and a whole match, which has the same fields) selects pods with.
func (b MatchBlock) validateSelection(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateGlobs(b.Namespaces, fld.Child("namespaces"))...)
	errs = append(errs, validateGlobs(b.ExcludeNamespaces, fld.Child("excludeNamespaces"))...)
	errs = append(errs, validateSelector(b.NamespaceSelector, fld.Child("namespaceSelector"))...)
	errs = append(errs, validateSelector(b.PodSelector, fld.Child("podSelector"))...)
	return append(errs, validateSelector(b.ExcludePodSelector, fld.Child("excludePodSelector"))...)
}
