package manifestgen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// ProjectFile is the operator-sdk project file, beside the config directory (a path below it,
// as Write takes them): its resources are the watched kinds, which `operator-sdk generate
// kustomize manifests` reads for the bundle.
const ProjectFile = "../PROJECT"

// Project returns the project file at path with its resources set to kinds, the rest as it is;
// nil when there is none.
func Project(path string, kinds []Kind) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var project map[string]any
	if err := yaml.Unmarshal(raw, &project); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	domain, _ := project["domain"].(string)
	resources := make([]any, 0, len(kinds))
	for _, k := range kinds {
		r := map[string]any{
			"api":     map[string]any{"crdVersion": "v1", "namespaced": k.Namespaced},
			"group":   k.GVK.Group,
			"kind":    k.GVK.Kind,
			"version": k.GVK.Version,
		}
		// A group under the project's domain is written as its first label, as operator-sdk does.
		if short, ok := strings.CutSuffix(k.GVK.Group, "."+domain); ok && domain != "" {
			r["group"], r["domain"] = short, domain
		}
		resources = append(resources, r)
	}
	project["resources"] = resources
	out, err := yaml.Marshal(project)
	if err != nil {
		return nil, err
	}
	return append(leadingComments(raw), out...), nil
}

// leadingComments returns the comment lines a YAML document starts with.
func leadingComments(raw []byte) []byte {
	var out []byte
	for line := range bytes.Lines(raw) {
		if !bytes.HasPrefix(line, []byte("#")) {
			break
		}
		out = append(out, line...)
	}
	return out
}

// projectPath is the project file of the project whose watches file is at watchesPath.
func projectPath(watchesPath string) string {
	return filepath.Join(filepath.Dir(watchesPath), filepath.Base(ProjectFile))
}
