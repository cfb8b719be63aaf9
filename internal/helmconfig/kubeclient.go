package helmconfig

import (
	"fmt"
	"io"
	"strings"

	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// kubeClient is Helm's own client with a shared reachability check, which labels every object
// it builds as a release object (names.ManagedLabel). Embedding the concrete type keeps every
// optional interface Helm looks for (waiting, deletion propagation...).
type kubeClient struct {
	*kube.Client
	getter    *Getter
	releaseNS string
}

// Build implements kube.Interface. Helm builds every manifest it applies, deletes or runs as a
// hook, and the plugins' owner-reference post-renderer builds each rendered manifest through
// this client too, so the label reaches the objects and the manifest stored in the release,
// and an object outside the release's reach is refused before any of them is sent.
//
// It never validates against the OpenAPI schema, whatever Helm asks: the install and upgrade
// options already turn that off for the release manifest (controller.actionClients), but Helm
// builds hook manifests with it on, which fetches the OpenAPI documents and reads the release's
// Namespace (a right the operator is not given) for every hook run. The apiserver validates
// every object it is sent either way.
func (c *kubeClient) Build(reader io.Reader, _ bool) (kube.ResourceList, error) {
	objs, err := c.Client.Build(reader, false)
	if err != nil {
		return objs, err
	}
	if err := c.confine(objs); err != nil {
		return nil, err
	}
	return objs, label(objs, c.getter.managed)
}

// confine refuses the first object of objs outside the release's reach.
func (c *kubeClient) confine(objs kube.ResourceList) error {
	for _, info := range objs {
		if info.Mapping == nil {
			return fmt.Errorf("refused to write %s %q: its scope is unknown", info.Object.GetObjectKind().GroupVersionKind(), info.Name)
		}
		o := tenancy.Object{GroupKind: info.Mapping.GroupVersionKind.GroupKind(),
			Namespaced: info.Mapping.Scope.Name() == meta.RESTScopeNameNamespace, Namespace: info.Namespace, Name: info.Name}
		if !o.Namespaced {
			o.Namespace = ""
		}
		if err := c.getter.reach.Write(c.releaseNS, o); err != nil {
			return err
		}
	}
	return nil
}

// hookChecked is a release storage that refuses a new revision whose hooks are outside the
// release's reach: Helm stores the record before it runs the first hook, and builds each hook
// only when it runs it, so an earlier hook would be written before a later one is refused.
type hookChecked struct {
	driver.Driver
	kube *kubeClient
}

// Create implements driver.Driver.
func (h *hookChecked) Create(key string, rls *release.Release) error {
	for _, hook := range rls.Hooks {
		if _, err := h.kube.Build(strings.NewReader(hook.Manifest), false); err != nil {
			return fmt.Errorf("hook %s: %w", hook.Path, err)
		}
	}
	return h.Driver.Create(key, rls)
}

// IsReachable answers Helm's check before every action from the capabilities: the apiserver
// answered within TTL, or is asked again (Helm asks the same question, /version).
func (c *kubeClient) IsReachable() error {
	_, err := c.getter.capabilities()
	return err
}

// label sets the managed label (names.ManagedLabel) to value on every object of a list built by
// Helm's kube client. It is set here, not by a post-renderer: helm-operator-plugins'
// owner-reference post-renderer already builds and re-serialises every rendered manifest through
// this client, so the label lands in the manifest stored in the release at no cost.
func label(objs kube.ResourceList, value string) error {
	return objs.Visit(func(info *resource.Info, err error) error {
		if err != nil {
			return err
		}
		m, err := meta.Accessor(info.Object)
		if err != nil {
			return fmt.Errorf("labelling %s %s: %w", info.Mapping.GroupVersionKind.Kind, info.Name, err)
		}
		m.SetLabels(labels.Merge(m.GetLabels(), labels.Set{names.ManagedLabel: value}))
		return nil
	})
}
