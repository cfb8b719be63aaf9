// Package conversion serves the API versions a chart declares for its kind (kind.yaml
// `versions`): the apiserver converts a custom resource between served versions through the
// operator's conversion webhook (this file), whose certificate the operator provisions and whose
// CA it injects into the CRD (certs.go), and, once a new version is stored, every resource stored
// at an older one is rewritten to it and the CRD's storedVersions trimmed (migrate.go). What
// converts is the chart's declaration (chartapi: Convert); this package only carries it out. A
// kind of one version converts nothing, and with none, none of this runs.
package conversion

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/watchesfile"
)

// Path is where the webhook serves conversions (the CRDs' clientConfig names it).
const Path = "/convert"

// Kind is one kind that declares versions.
type Kind struct {
	// CRD is its CustomResourceDefinition's name; Storage the version the chart renders (the
	// newest, which watches.yaml watches).
	CRD     string
	Storage schema.GroupVersionKind
	Decl    *chartapi.Compiled
}

// Webhook converts custom resources between the versions their kinds declare.
type Webhook struct {
	Kinds map[schema.GroupKind]Kind
}

// ServeHTTP answers a ConversionReview.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	var review apiextensionsv1.ConversionReview
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil || review.Request == nil {
		http.Error(rw, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		obj := &unstructured.Unstructured{}
		if err = obj.UnmarshalJSON(raw.Raw); err == nil {
			err = w.Convert(obj, review.Request.DesiredAPIVersion)
		}
		if err != nil {
			resp = &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusFailure,
				Message: fmt.Sprintf("%s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)}}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Object: obj})
	}
	review.Request, review.Response = nil, resp
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}

// Convert converts obj to apiVersion as its kind declares: its spec, and the fields one version
// has no place for, kept in an annotation until it is read at a version that has.
func (w *Webhook) Convert(obj *unstructured.Unstructured, apiVersion string) error {
	to, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return err
	}
	k, ok := w.Kinds[obj.GroupVersionKind().GroupKind()]
	if !ok || to.Group != k.Storage.Group {
		return fmt.Errorf("no conversion of %s to %s is declared", obj.GroupVersionKind().GroupKind(), apiVersion)
	}
	kept := chartapi.Kept{}
	annotations := obj.GetAnnotations()
	if raw := annotations[names.ConversionAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &kept); err != nil {
			return fmt.Errorf("annotation %s: %w", names.ConversionAnnotation, err)
		}
	}
	if spec, ok := obj.Object["spec"].(map[string]any); ok {
		if spec, err = k.Decl.Convert(spec, obj.GroupVersionKind().Version, to.Version, kept); err != nil {
			return err
		}
		obj.Object["spec"] = spec
	}
	delete(annotations, names.ConversionAnnotation)
	if len(kept) > 0 {
		raw, _ := json.Marshal(kept)
		annotations = labels.Merge(annotations, labels.Set{names.ConversionAnnotation: string(raw)})
	}
	obj.SetAnnotations(annotations)
	obj.SetAPIVersion(apiVersion)
	return nil
}

// crdObject is the CRD name, to read.
func crdObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	u.SetName(name)
	return u
}

// Options are how the webhook is served (the operator's flags).
type Options struct {
	// BindAddress is host:port the webhook listens on; CertDir where its certificate is.
	BindAddress, CertDir string
	// Service, Namespace: the Service in front of the webhook and its namespace (make deploy);
	// "": no Service (Certs).
	Service, Namespace string
	// Client reads and writes directly, unfenced (Certs).
	Client client.Client
}

// Setup serves the versions of the watched kinds that declare more than one: it makes the
// webhook's certificate ready and adds the webhook, the certificate's renewal and the storage
// migration to the manager. It adds nothing when no kind declares versions.
func Setup(ctx context.Context, mgr manager.Manager, ws []watchesfile.Watch, o Options) error {
	kinds := map[schema.GroupKind]Kind{}
	var crds []string
	for _, w := range ws {
		decl, err := chartapi.LoadCompiled(w.ChartPath)
		if err == nil {
			err = decl.Kind.CheckVersions(w.Version)
		}
		if err != nil {
			return fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		if len(decl.Kind.Versions) < 2 {
			continue
		}
		mapping, err := mgr.GetRESTMapper().RESTMapping(w.GroupKind(), w.Version)
		if err != nil {
			return fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		k := Kind{CRD: mapping.Resource.Resource + "." + w.Group, Storage: w.GroupVersionKind, Decl: decl}
		kinds[w.GroupKind()], crds = k, append(crds, k.CRD)
	}
	if len(kinds) == 0 {
		return nil
	}
	if o.Service != "" && o.Namespace == "" {
		return errors.New("--webhook-service: the operator's namespace is unknown out of a cluster: set --leader-election-namespace")
	}
	host, port, err := net.SplitHostPort(o.BindAddress)
	portNumber := 0
	if err == nil {
		portNumber, err = strconv.Atoi(port)
	}
	if err != nil {
		return fmt.Errorf("--webhook-bind-address: %w", err)
	}
	certs := &Certs{Dir: o.CertDir, Service: o.Service, Namespace: o.Namespace, CRDs: crds, Client: o.Client,
		URL: "https://" + net.JoinHostPort(cmp.Or(host, "localhost"), port) + Path}
	dir, renew, err := certs.Prepare(ctx)
	if err != nil {
		return fmt.Errorf("the conversion webhook's certificate: %w", err)
	}
	server := webhook.NewServer(webhook.Options{Host: host, Port: portNumber, CertDir: dir})
	server.Register(Path, &Webhook{Kinds: kinds})
	err = errors.Join(mgr.Add(server), mgr.Add(&Migration{Kinds: slices.Collect(maps.Values(kinds)), Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()}))
	if renew != nil {
		err = errors.Join(err, mgr.Add(everyReplica(renew)))
	}
	return err
}

// everyReplica is a runnable every replica runs, leader or not.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }
