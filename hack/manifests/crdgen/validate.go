package crdgen

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate runs the apiserver's own validation of a CustomResourceDefinition (the one
// `kubectl apply` of it would meet: structural schema, CEL rules and their cost, names), so that
// `make manifests` never writes a CRD the apiserver refuses.
func Validate(crd *apiextv1.CustomResourceDefinition) error {
	if errs := validationErrors(crd); len(errs) > 0 {
		return fmt.Errorf("the apiserver would refuse the CRD %s: %w", crd.Name, errs.ToAggregate())
	}
	return nil
}

// validationErrors are the apiserver's errors of a CRD.
func validationErrors(crd *apiextv1.CustomResourceDefinition) field.ErrorList {
	v1 := crd.DeepCopy()
	apiextv1.SetObjectDefaults_CustomResourceDefinition(v1)
	var internal apiextensions.CustomResourceDefinition
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, &internal, nil); err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return validation.ValidateCustomResourceDefinition(context.Background(), &internal)
}
