package mapexport

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// The oldest apiserver the exported policies are for: admissionregistration
// v1 MutatingAdmissionPolicy is GA in 1.36. A 1.36 apiserver compiles new
// expressions against the CEL environment of its compatibility version,
// 1.35, so Apply does too: an expression that compiles here is accepted there.
var compatibility = version.MajorMinor(1, 35)

var (
	podGVK = corev1.SchemeGroupVersion.WithKind("Pod")
	podGVR = corev1.SchemeGroupVersion.WithResource("pods")
)

// Apply runs exported policies on a pod CREATE offline, with the
// apiserver's own MutatingAdmissionPolicy code (k8s.io/apiserver's CEL
// compiler, match conditions and ApplyConfiguration and JSONPatch patchers):
// what the apiserver would store, before its defaulting and validation. The
// policies run in order; ns is the pod's namespace. The pod is not
// modified.
func Apply(ctx context.Context, exported []Exported, pod *corev1.Pod, ns *corev1.Namespace) (*corev1.Pod, error) {
	out := pod.DeepCopy()
	out.SetGroupVersionKind(podGVK)
	if out.Namespace == "" {
		out.Namespace = ns.Name
	}
	for _, e := range exported {
		var err error
		if out, err = applyPolicy(ctx, e, out, ns); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Policy.Name, err)
		}
	}
	return out, nil
}

func applyPolicy(ctx context.Context, e Exported, pod *corev1.Pod, ns *corev1.Namespace) (*corev1.Pod, error) {
	p := e.Policy
	for _, mr := range []*admissionregistrationv1.MatchResources{p.Spec.MatchConstraints, e.Binding.Spec.MatchResources} {
		ok, err := matchesResources(mr, pod, ns)
		if err != nil || !ok {
			return pod, err
		}
	}

	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(compatibility))
	if err != nil {
		return nil, err
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	for _, v := range p.Spec.Variables {
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions)
		if r.Error != nil {
			return nil, fmt.Errorf("variable %s: %w", v.Name, r.Error)
		}
	}

	attr := admission.NewAttributesRecord(pod.DeepCopy(), nil, podGVK, ns.Name, pod.Name, podGVR, "",
		admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "sandbox-webhook-offline"})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: podGVK, VersionedObject: admission.NewLazyObject(pod.DeepCopy())}

	if len(p.Spec.MatchConditions) > 0 {
		var acc []plugincel.ExpressionAccessor
		for i := range p.Spec.MatchConditions {
			acc = append(acc, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
		}
		cond := compiler.CompileCondition(acc, opts, environment.NewExpressions)
		if errs := cond.CompilationErrors(); len(errs) > 0 {
			return nil, fmt.Errorf("match conditions: %w", errors.Join(errs...))
		}
		r := matchconditions.NewMatcher(cond, p.Spec.FailurePolicy, "policy", "mutate", p.Name).Match(ctx, va, nil, nil)
		if r.Error != nil {
			return nil, r.Error
		}
		if !r.Matches {
			return pod, nil
		}
	}

	scheme := clientgoscheme.Scheme
	objects := admission.NewObjectInterfacesFromScheme(scheme)
	types := applyconfigurations.NewTypeConverter(scheme)
	popts := opts
	popts.HasPatchTypes = true
	for i, m := range p.Spec.Mutations {
		var patcher patch.Patcher
		var eval plugincel.MutatingEvaluator
		switch m.PatchType {
		case admissionregistrationv1.PatchTypeJSONPatch:
			eval = compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, popts, environment.NewExpressions)
			patcher = patch.NewJSONPatcher(eval)
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			eval = compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, popts, environment.NewExpressions)
			patcher = patch.NewApplyConfigurationPatcher(eval)
		default:
			return nil, fmt.Errorf("mutation %d: unsupported patchType %q", i, m.PatchType)
		}
		if errs := eval.CompilationErrors(); len(errs) > 0 {
			return nil, fmt.Errorf("mutation %d: %w", i, errors.Join(errs...))
		}
		obj, err := patcher.Patch(compiler.CreateContext(ctx), patch.Request{
			MatchedResource:     podGVR,
			VersionedAttributes: va,
			ObjectInterfaces:    objects,
			Namespace:           ns,
			TypeConverter:       types,
		}, celconfig.RuntimeCELCostBudget)
		if err != nil {
			return nil, fmt.Errorf("mutation %d: %w", i, err)
		}
		next := &corev1.Pod{}
		switch o := obj.(type) {
		case *corev1.Pod:
			next = o
		case *unstructured.Unstructured:
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, next); err != nil {
				return nil, fmt.Errorf("mutation %d: %w", i, err)
			}
		default:
			return nil, fmt.Errorf("mutation %d: unexpected result %T", i, obj)
		}
		next.SetGroupVersionKind(podGVK)
		va.UpdateObject(next)
	}
	return va.VersionedObject.Object().(*corev1.Pod), nil
}

// matchesResources evaluates the label selectors of match resources (the
// resource rules of exported policies always are pod CREATE).
func matchesResources(mr *admissionregistrationv1.MatchResources, pod *corev1.Pod, ns *corev1.Namespace) (bool, error) {
	if mr == nil {
		return true, nil
	}
	for _, s := range []struct {
		sel    *metav1.LabelSelector
		labels map[string]string
	}{{mr.NamespaceSelector, ns.Labels}, {mr.ObjectSelector, pod.Labels}} {
		if s.sel == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.sel)
		if err != nil {
			return false, err
		}
		if !sel.Matches(labels.Set(s.labels)) {
			return false, nil
		}
	}
	return true, nil
}
