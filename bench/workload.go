package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/example/myproxy-operator/test/certs"
)

// spec is the spec of every benchmark MyProxy: one replica and one route, the common case.
func spec() map[string]any {
	return map[string]any{
		"replicas": int64(1),
		"routes": []any{map[string]any{
			"path": "/", "upstream": "http://backend.default.svc.cluster.local:8080",
		}},
	}
}

// tlsSecretName is the Secret the lookup releases serve HTTPS with; their chart reads it with
// lookup (for the checksum that rolls Pods when it changes).
const tlsSecretName = "bench-tls"

// lookupSpec is spec with TLS: a rendering that looks up the TLS Secret.
func lookupSpec() map[string]any {
	s := spec()
	s["tls"] = map[string]any{"secretName": tlsSecretName}
	return s
}

func myProxyWith(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(myProxyGVR.Group + "/" + myProxyGVR.Version)
	u.SetKind("MyProxy")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// kind is the custom resource a subject's fleet is made of, one per release: the chart's values
// go into it, and its condition says when the release is installed.
type kind struct {
	gvr       schema.GroupVersionResource
	condition string
	// object is the custom resource of that name whose release carries values.
	object func(namespace, name string, values map[string]any) *unstructured.Unstructured
	// install, when set, prepares a fresh cluster for the kind before any watch of it starts
	// (CRDs, objects the releases need); stop undoes what runs in this process.
	install func(ctx context.Context, e *env) (stop func(), err error)
}

// myProxies are the fleet of the Helm operators: a MyProxy's spec is its release's values.
var myProxies = kind{gvr: myProxyGVR, condition: "Deployed", object: myProxyWith}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// parallel runs f for every name on the given number of workers and returns the first error.
func parallel(ctx context.Context, workers int, items []string, f func(context.Context, string) error) error {
	ch := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := f(ctx, it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return first
}

// create creates custom resources of the kind whose releases carry values().
func (k kind) create(dyn dynamic.Interface, namespace string, values func() map[string]any) func(context.Context, string) error {
	return func(ctx context.Context, name string) error {
		_, err := dyn.Resource(k.gvr).Namespace(namespace).Create(ctx, k.object(namespace, name, values()), metav1.CreateOptions{})
		return err
	}
}

// delete deletes custom resources of the kind; one already gone is deleted.
func (k kind) delete(dyn dynamic.Interface, namespace string) func(context.Context, string) error {
	return func(ctx context.Context, name string) error {
		err := dyn.Resource(k.gvr).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
}

func createProxy(dyn dynamic.Interface, namespace string) func(context.Context, string) error {
	return myProxies.create(dyn, namespace, spec)
}

// createTLSSecret creates the Secret the lookup releases read.
func createTLSSecret(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	pair, err := certs.New("bench", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tlsSecretName}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: pair.Cert, corev1.TLSPrivateKeyKey: pair.Key},
	}, metav1.CreateOptions{})
	return err
}

func deleteProxy(dyn dynamic.Interface, namespace string) func(context.Context, string) error {
	return myProxies.delete(dyn, namespace)
}

// renderer renders the chart for one MyProxy exactly as Helm would install it, without a
// cluster: the client-go baseline creates these objects itself.
type renderer struct {
	chart *chart.Chart
}

func (r renderer) render(namespace, name string) ([]*unstructured.Unstructured, error) {
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = name, namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.35.0", Major: "1", Minor: "35"}
	rel, err := install.Run(r.chart, spec())
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(rel.Manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// createRendered creates the MyProxy and the chart's objects for it: what an operator has to
// bring about, with nothing in between.
func createRendered(dyn dynamic.Interface, mapper meta.RESTMapper, r renderer, namespace string) func(context.Context, string) error {
	return func(ctx context.Context, name string) error {
		if err := createProxy(dyn, namespace)(ctx, name); err != nil {
			return err
		}
		return eachRendered(dyn, mapper, r, namespace, name, func(res dynamic.ResourceInterface, o *unstructured.Unstructured) error {
			_, err := res.Create(ctx, o, metav1.CreateOptions{})
			return err
		})
	}
}

// deleteRendered deletes what createRendered created.
func deleteRendered(dyn dynamic.Interface, mapper meta.RESTMapper, r renderer, namespace string) func(context.Context, string) error {
	return func(ctx context.Context, name string) error {
		err := eachRendered(dyn, mapper, r, namespace, name, func(res dynamic.ResourceInterface, o *unstructured.Unstructured) error {
			if err := res.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		return deleteProxy(dyn, namespace)(ctx, name)
	}
}

// eachRendered calls f with every object the chart renders for the MyProxy name, and the
// client of its resource.
func eachRendered(dyn dynamic.Interface, mapper meta.RESTMapper, r renderer, namespace, name string,
	f func(dynamic.ResourceInterface, *unstructured.Unstructured) error) error {
	objs, err := r.render(namespace, name)
	if err != nil {
		return err
	}
	for _, o := range objs {
		m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			return err
		}
		if err := f(dyn.Resource(m.Resource).Namespace(namespace), o); err != nil {
			return err
		}
	}
	return nil
}

// leftovers counts what is left in the namespace of the releases: objects of the chart and Helm
// release Secrets.
func leftovers(ctx context.Context, cs kubernetes.Interface, namespace string) (int, error) {
	managed := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=Helm"}
	n := 0
	deps, err := cs.AppsV1().Deployments(namespace).List(ctx, managed)
	if err != nil {
		return 0, err
	}
	n += len(deps.Items)
	svcs, err := cs.CoreV1().Services(namespace).List(ctx, managed)
	if err != nil {
		return 0, err
	}
	n += len(svcs.Items)
	cms, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, managed)
	if err != nil {
		return 0, err
	}
	n += len(cms.Items)
	secrets, err := cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		return 0, err
	}
	n += len(secrets.Items)
	return n, nil
}

// unrelated fills namespaces with Secrets and ConfigMaps that no operator has any business
// with, each carrying size bytes of data.
func unrelated(ctx context.Context, cs kubernetes.Interface, count, size, workers int) error {
	const namespaces = 10
	for i := 0; i < namespaces; i++ {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", i)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	payload := bytes.Repeat([]byte("x"), size)
	return parallel(ctx, workers, names("unrelated", count), func(ctx context.Context, name string) error {
		var i int
		_, _ = fmt.Sscanf(name, "unrelated-%d", &i)
		ns := fmt.Sprintf("unrelated-%d", i%namespaces)
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"blob": payload},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"blob": string(payload)},
		}, metav1.CreateOptions{})
		return err
	})
}
