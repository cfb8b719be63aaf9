package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

// imageConfig is what a container runtime reads of an image's config.
type imageConfig struct {
	Entrypoint, Cmd, Env []string
	User, WorkingDir     string
	Labels               map[string]string
}

// inspected is what bin/oci inspect reports of an image.
type inspected struct {
	Digest string
	Config struct{ Config imageConfig }
	Layers []struct {
		Files []struct {
			Path, Mode, Link string
			UID, GID         int
		}
	}
}

func oci(t *testing.T) string { return harness.Tool(t, "OCI", "oci") }

func inspect(t *testing.T, image string) inspected {
	t.Helper()
	var out inspected
	raw := harness.Run(t, nil, oci(t), "inspect", image)
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("oci inspect %s: %v\n%s", image, err, raw)
	}
	return out
}

// export writes the filesystem of image (a registry reference or an OCI layout) into a new
// directory and returns it.
func export(t *testing.T, image string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rootfs")
	harness.Run(t, nil, oci(t), "export", image, dir)
	return dir
}

// printed is the digest, or the reference by digest, that a make target printed last (its
// output also holds what the build says of its progress).
func printed(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.Contains(l, "sha256:") && !strings.Contains(l, " ") {
			return l
		}
	}
	return ""
}

// container is one container of a Pod, to be run as its kubelet would run it.
type container struct {
	pod   *corev1.Pod
	spec  corev1.Container
	image string // a registry reference; empty: binary stands in for an image
	// binary is the program of an image this project does not build (OLM's): it is placed at
	// the container's command path in an otherwise empty filesystem.
	binary string
	uid    uint32
}

// running is a container started by start, with the loopback address each of its ports was
// given.
type running struct {
	*harness.Operator
	ports map[int32]string
}

// hostPort matches a listen address of all interfaces in an argument, as --flag=:8443 gives it.
var hostPort = regexp.MustCompile(`(^|=):(\d+)$`)

// start runs the container as the kubelet would on its node, without a container runtime: in
// the image's filesystem (exported from the registry, so what runs is what was pushed), as the
// image's or the Pod's user, in the image's working directory, with the image's and the
// container's environment, the image's entrypoint and the container's arguments, the Pod's
// ServiceAccount token, the cluster's CA and the namespace where every Pod finds them, and the
// Secrets its volumes mount. The one difference is the network: the host's, with the Pod's IP
// added to the loopback interface, where the apiserver reaches the endpoints of a Service (a
// webhook); each port the container listens on for all interfaces, as its arguments name it,
// is given the Pod's IP (a free loopback address for a container of no Pod in the cluster).
func (c container) start(t *testing.T, kube client.Client) running {
	t.Helper()
	var cfg imageConfig
	var root string
	if c.image != "" {
		cfg = inspect(t, c.image).Config.Config
		root = export(t, c.image)
	} else {
		root = filepath.Join(t.TempDir(), "rootfs")
		dst := filepath.Join(root, c.spec.Command[0])
		must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		if err := os.Link(c.binary, dst); err != nil {
			raw, err := os.ReadFile(c.binary)
			must(t, err)
			must(t, os.WriteFile(dst, raw, 0o755))
		}
	}
	must(t, os.Chmod(root, 0o755))
	// Pods here mount an emptyDir at /tmp, and the kubelet makes the mount's parents.
	must(t, os.MkdirAll(filepath.Join(root, "tmp"), 0o755))
	must(t, os.Chmod(filepath.Join(root, "tmp"), 0o1777))
	c.mountServiceAccount(t, kube, filepath.Join(root, "var", "run", "secrets", "kubernetes.io", "serviceaccount"))
	c.mountSecrets(t, kube, root)
	if ip := c.pod.Status.PodIP; ip != "" {
		onLoopback(t, ip)
	}

	env := append([]string{}, cfg.Env...)
	vars := map[string]string{}
	for _, e := range c.spec.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.namespace":
				v = c.pod.Namespace
			case "metadata.name":
				v = c.pod.Name
			default:
				t.Fatalf("container %s: env %s from %s is not known here", c.spec.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	api := apiServer(t)
	env = append(env, "KUBERNETES_SERVICE_HOST="+api.Hostname(), "KUBERNETES_SERVICE_PORT="+api.Port(), "HOME=/")

	argv := cfg.Entrypoint
	if len(c.spec.Command) > 0 {
		argv = c.spec.Command
	}
	args := cfg.Cmd
	if len(c.spec.Command) > 0 || len(c.spec.Args) > 0 {
		args = c.spec.Args
	}
	r := running{ports: map[int32]string{}}
	for _, a := range args {
		a = os.Expand(strings.ReplaceAll(strings.ReplaceAll(a, "$(", "${"), ")", "}"), func(k string) string { return vars[k] })
		if m := hostPort.FindStringSubmatch(a); m != nil {
			port, _ := strconv.Atoi(m[2])
			addr := harness.FreeAddr(t)
			if ip := c.pod.Status.PodIP; ip != "" {
				addr = net.JoinHostPort(ip, m[2])
			}
			r.ports[int32(port)] = addr
			a = strings.TrimSuffix(a, ":"+m[2]) + addr
		}
		argv = append(argv, a)
	}
	workdir := cfg.WorkingDir
	if c.spec.WorkingDir != "" {
		workdir = c.spec.WorkingDir
	}
	if workdir == "" {
		workdir = "/"
	}
	uid, gid := c.uid, c.uid
	if u := cfg.User; u != "" {
		user, group, _ := strings.Cut(u, ":")
		n, err := strconv.ParseUint(user, 10, 32)
		if err != nil {
			t.Fatalf("image user %q is not numeric", u)
		}
		uid, gid = uint32(n), uint32(n)
		if group != "" {
			g, err := strconv.ParseUint(group, 10, 32)
			must(t, err)
			gid = uint32(g)
		}
	}
	if sc := c.spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = uint32(*sc.RunAsUser)
	}
	if uid == 0 {
		t.Fatalf("container %s would run as root", c.spec.Name)
	}
	r.Operator = harness.StartContainer(t, harness.Container{Root: root, Dir: workdir, UID: uid, GID: gid, Argv: argv, Env: env})
	return r
}

// mountServiceAccount writes what the kubelet projects into every Pod: a token of the Pod's
// ServiceAccount bound to the Pod (or, for a container with no Pod in the cluster, to no
// object), the cluster's CA (the kube-root-ca.crt ConfigMap) and the namespace.
func (c container) mountServiceAccount(t *testing.T, kube client.Client, dir string) {
	t.Helper()
	ctx := context.Background()
	expiry := int64(3607) // the kubelet's
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	if c.pod.UID != "" {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: c.pod.Name, UID: c.pod.UID}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: c.pod.Namespace, Name: c.pod.Spec.ServiceAccountName}}
	if err := kube.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", sa.Namespace, sa.Name, err)
	}
	var ca corev1.ConfigMap
	harness.Eventually(t, 60*time.Second, "kube-root-ca.crt in "+c.pod.Namespace, func(ctx context.Context) (bool, string) {
		err := kube.Get(ctx, client.ObjectKey{Namespace: c.pod.Namespace, Name: "kube-root-ca.crt"}, &ca)
		return err == nil, fmt.Sprint(err)
	})
	must(t, os.MkdirAll(dir, 0o755))
	for name, content := range map[string]string{"token": tr.Status.Token, "ca.crt": ca.Data["ca.crt"], "namespace": c.pod.Namespace} {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
}

// mountSecrets writes into root what each Secret volume the container mounts holds (its items,
// or every key), as the kubelet projects it.
func (c container) mountSecrets(t *testing.T, kube client.Client, root string) {
	t.Helper()
	for _, m := range c.spec.VolumeMounts {
		for _, v := range c.pod.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			var s corev1.Secret
			must(t, kube.Get(context.Background(), client.ObjectKey{Namespace: c.pod.Namespace, Name: v.Secret.SecretName}, &s))
			files := map[string]string{}
			for key := range s.Data {
				files[key] = key
			}
			if len(v.Secret.Items) > 0 {
				files = map[string]string{}
				for _, item := range v.Secret.Items {
					files[item.Key] = item.Path
				}
			}
			dir := filepath.Join(root, m.MountPath)
			must(t, os.MkdirAll(dir, 0o755))
			for key, path := range files {
				must(t, os.WriteFile(filepath.Join(dir, path), s.Data[key], 0o644))
			}
		}
	}
}

// onLoopback adds ip to the loopback interface until the test ends.
func onLoopback(t *testing.T, ip string) {
	t.Helper()
	if out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "File exists") && !strings.Contains(string(out), "already assigned") {
		t.Fatalf("ip addr add %s: %v: %s", ip, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").Run() })
}

// waitReady polls the container's readiness probe (an HTTP GET, as the kubelet makes it) until
// it passes.
func (r running) waitReady(t *testing.T, spec corev1.Container) {
	t.Helper()
	probe := spec.ReadinessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatalf("container %s has no HTTP readiness probe", spec.Name)
	}
	port := probe.HTTPGet.Port.IntVal
	for _, p := range spec.Ports {
		if p.Name == probe.HTTPGet.Port.StrVal && probe.HTTPGet.Port.StrVal != "" {
			port = p.ContainerPort
		}
	}
	addr, ok := r.ports[port]
	if !ok {
		t.Fatalf("the readiness probe asks port %d, which the container does not listen on (%v)", port, r.ports)
	}
	harness.Eventually(t, 120*time.Second, "readiness probe of "+spec.Name, func(ctx context.Context) (bool, string) {
		if exited, err := r.Exited(); exited {
			t.Fatalf("container %s exited: %v\n%s", spec.Name, err, r.Log())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+probe.HTTPGet.Path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

// apiServer is the address of the cluster's apiserver, as KUBERNETES_SERVICE_HOST and _PORT
// give it to Pods.
func apiServer(t *testing.T) *url.URL {
	t.Helper()
	u, err := url.Parse(harness.ConfigFromKubeconfig(t, kubeconfig).Host)
	must(t, err)
	return u
}

// podOf waits for the one running Pod of the Deployment whose template has labels, and
// returns it.
func podOf(t *testing.T, kube client.Client, ns string, labels map[string]string, image string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	harness.Eventually(t, 120*time.Second, "the Pod of image "+image, func(ctx context.Context) (bool, string) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return false, err.Error()
		}
		var found []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.Containers[0].Image == image {
				pod = p
				return true, ""
			}
			found = append(found, p.Name+" "+string(p.Status.Phase)+" "+p.Spec.Containers[0].Image)
		}
		return false, fmt.Sprint(found)
	})
	return &pod
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
