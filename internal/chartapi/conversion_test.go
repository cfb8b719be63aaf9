package chartapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// threeVersions declares v1 (the chart's), v1beta1 and v1alpha1, each older one with its
// changes to the next newer one.
const threeVersions = `
versions:
  - name: v1
  - name: v1beta1
    changes:
      - compute:
          to: timeout
          from: [timeoutSeconds]
          expression: "string(self.timeoutSeconds) + 's'"
          back:
            timeoutSeconds: "int(self.timeout.replace('s', ''))"
      - move: {from: tls.secret, to: tls.secretName}
  - name: v1alpha1
    changes:
      - move: {from: replicas, to: replicaCount}
      - remove: {field: legacy, why: the proxy dropped it}
`

// compiledVersions compiles decl, whose first version, watched, is the chart's own.
func compiledVersions(t *testing.T, decl, watched string) *Compiled {
	t.Helper()
	k, err := Parse([]byte(decl))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.CheckVersions(watched); err != nil {
		t.Fatal(err)
	}
	c, err := Compile(k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func specOf(t *testing.T, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return normalised(t, m)
}

// normalised is m as a decoded JSON document with whole numbers as int64, as the apiserver's
// objects hold them.
func normalised(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(m)
	var out map[string]any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	var fix func(v any) any
	fix = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			if i, err := x.Int64(); err == nil {
				return i
			}
			f, _ := x.Float64()
			return f
		case map[string]any:
			for k, c := range x {
				x[k] = fix(c)
			}
		case []any:
			for i, c := range x {
				x[i] = fix(c)
			}
		}
		return v
	}
	return fix(out).(map[string]any)
}

// Each change converts up and back; a round trip, either way and across versions, gives back
// what was stored: a removed field and a field an older version does not hold travel in Kept.
func TestConversionRoundTrips(t *testing.T) {
	c := compiledVersions(t, threeVersions, "v1")
	// The schemas the older versions were served with: v1alpha1 holds replicas, legacy,
	// timeoutSeconds, tls.secret and image; v1beta1 keeps unknown fields.
	str := map[string]any{"type": "string"}
	c.Kind.Versions[1].Published = published(map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true})
	c.Kind.Versions[2].Published = published(map[string]any{"type": "object", "properties": map[string]any{
		"replicas": str, "legacy": str, "timeoutSeconds": str, "image": str,
		"tls": map[string]any{"type": "object", "properties": map[string]any{"secret": str}}}})
	cases := []struct {
		name, from, to string
		spec, want     string
	}{
		{name: "up two versions", from: "v1alpha1", to: "v1",
			spec: `{"replicas":3,"legacy":"x","timeoutSeconds":30,"tls":{"secret":"cert"},"image":"nginx"}`,
			want: `{"replicaCount":3,"timeout":"30s","tls":{"secretName":"cert"},"image":"nginx"}`},
		{name: "down two versions", from: "v1", to: "v1alpha1",
			spec: `{"replicaCount":3,"timeout":"30s","tls":{"secretName":"cert"},"image":"nginx"}`,
			want: `{"replicas":3,"timeoutSeconds":30,"tls":{"secret":"cert"},"image":"nginx"}`},
		{name: "a compute with nothing to compute from sets nothing", from: "v1alpha1", to: "v1",
			spec: `{"replicas":1}`, want: `{"replicaCount":1}`},
		{name: "a field v1alpha1 does not hold", from: "v1", to: "v1alpha1",
			spec: `{"replicaCount":2,"tls":{"secretName":"cert","minVersion":"1.3"},"newThing":true}`,
			want: `{"replicas":2,"tls":{"secret":"cert"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kept := Kept{}
			got, err := c.Convert(specOf(t, tc.spec), tc.from, tc.to, kept)
			if err != nil {
				t.Fatal(err)
			}
			if want := specOf(t, tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("converted %s, want %s", show(got), show(want))
			}
			back, err := c.Convert(got, tc.to, tc.from, kept)
			if err != nil {
				t.Fatal(err)
			}
			if stored := specOf(t, tc.spec); !reflect.DeepEqual(back, stored) {
				t.Errorf("round trip gave %s, want what was stored, %s (kept %v)", show(back), show(stored), kept)
			}
			if len(kept) != 0 {
				t.Errorf("after the round trip Kept still holds %v", kept)
			}
		})
	}
}

// listVersions declares v2 (the chart's) and v1, which moves an object and a list: v2 added
// fields under both and in the items of another list.
const listVersions = `
versions:
  - name: v2
  - name: v1
    changes:
      - move: {from: tls, to: security.tls}
      - move: {from: backends, to: upstream.backends}
`

// v1Lists is the spec schema v1 was served with: no minVersion, weight or retries.
func v1Lists() map[string]any {
	str := map[string]any{"type": "string"}
	object := func(props map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": props}
	}
	list := func(item map[string]any) map[string]any { return map[string]any{"type": "array", "items": item} }
	return object(map[string]any{"tls": object(map[string]any{"secretName": str}),
		"hosts":    map[string]any{"type": "object", "additionalProperties": object(map[string]any{"cert": str})},
		"backends": list(object(map[string]any{"host": str})),
		"routes":   list(object(map[string]any{"path": str, "rewrite": list(object(map[string]any{"from": str}))}))})
}

// A field a newer version added under a moved object, under a map's values (keys with dots
// among them), or in a list's items, comes back from a write at the older version: a list's
// items are found again where the older version's client reordered them, an item it edited or
// added stays as it wrote it, and an object it removed stays removed.
func TestFieldsAnOlderVersionLacksSurviveItsWrites(t *testing.T) {
	c := compiledVersions(t, listVersions, "v2")
	c.Kind.Versions[1].Published = published(v1Lists())
	stored := `{"security":{"tls":{"secretName":"cert","minVersion":"1.3"}},"hosts":{"a.example.com":{"cert":"a","minVersion":"1.2"}},
		"upstream":{"backends":[{"host":"a","weight":2},{"host":"b","weight":1}]},
		"routes":[{"path":"/a","retries":1,"rewrite":[{"from":"/x","flags":"last"}]},{"path":"/b","retries":2},{"path":"/c"}]}`
	asV1 := `{"tls":{"secretName":"cert"},"hosts":{"a.example.com":{"cert":"a"}},"backends":[{"host":"a"},{"host":"b"}],
		"routes":[{"path":"/a","rewrite":[{"from":"/x"}]},{"path":"/b"},{"path":"/c"}]}`
	cases := []struct {
		name  string
		write func(v1 map[string]any) // what a client writing at v1 changes
		want  string
	}{
		{name: "read and written back unchanged", write: func(map[string]any) {}, want: stored},
		{name: "routes reordered, one edited, one added; a backend removed",
			write: func(v1 map[string]any) {
				r := v1["routes"].([]any)
				r[1].(map[string]any)["path"] = "/b2"
				v1["routes"] = []any{r[2], r[1], r[0], map[string]any{"path": "/d"}}
				v1["backends"] = v1["backends"].([]any)[1:]
			},
			want: `{"security":{"tls":{"secretName":"cert","minVersion":"1.3"}},"hosts":{"a.example.com":{"cert":"a","minVersion":"1.2"}},"upstream":{"backends":[{"host":"b","weight":1}]},
				"routes":[{"path":"/c"},{"path":"/b2"},{"path":"/a","retries":1,"rewrite":[{"from":"/x","flags":"last"}]},{"path":"/d"}]}`},
		{name: "the list emptied", write: func(v1 map[string]any) { delete(v1, "routes") },
			want: `{"security":{"tls":{"secretName":"cert","minVersion":"1.3"}},"hosts":{"a.example.com":{"cert":"a","minVersion":"1.2"}},"upstream":{"backends":[{"host":"a","weight":2},{"host":"b","weight":1}]}}`},
		{name: "tls and a host removed", write: func(v1 map[string]any) {
			delete(v1, "tls")
			v1["hosts"] = map[string]any{"b": map[string]any{"cert": "b"}}
		},
			want: `{"hosts":{"b":{"cert":"b"}},"upstream":{"backends":[{"host":"a","weight":2},{"host":"b","weight":1}]},
				"routes":[{"path":"/a","retries":1,"rewrite":[{"from":"/x","flags":"last"}]},{"path":"/b","retries":2},{"path":"/c"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kept := Kept{}
			v1, err := c.Convert(specOf(t, stored), "v2", "v1", kept)
			if err != nil {
				t.Fatal(err)
			}
			if want := specOf(t, asV1); !reflect.DeepEqual(v1, want) {
				t.Fatalf("at v1 %s, want %s", show(v1), show(want))
			}
			// The kept fields travel in an annotation: through JSON, as the webhook reads them.
			raw, _ := json.Marshal(kept)
			kept = Kept{}
			if err := json.Unmarshal(raw, &kept); err != nil {
				t.Fatal(err)
			}
			tc.write(v1)
			got, err := c.Convert(v1, "v1", "v2", kept)
			if err != nil {
				t.Fatal(err)
			}
			if want := specOf(t, tc.want); !reflect.DeepEqual(normalised(t, got), want) {
				t.Errorf("written at v1, stored %s, want %s", show(got), show(want))
			}
		})
	}
}

func show(v any) string { b, _ := json.Marshal(v); return string(b) }

// published is a CRD version entry whose spec schema is spec.
func published(spec map[string]any) map[string]any {
	return map[string]any{"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
		"properties": map[string]any{"spec": spec}}}}
}

func TestVersionsAreCheckedWhenLoaded(t *testing.T) {
	for decl, want := range map[string]string{
		"versions: [{name: v1}]": "",
		"versions: [{name: v2}]": "the first is v2, but watches.yaml watches v1",
		"versions: [{name: v1, changes: [{move: {from: a, to: b}}]}]":                                             "v1, the chart's own version, is served and has no changes",
		"versions: [{name: v1}, {name: v1}]":                                                                      `"v1": a version is named once`,
		"versions: [{name: v1}, {name: beta}]":                                                                    `"beta": a version is named once`,
		"versions: [{name: v1}, {name: v1beta1, changes: [{remove: {field: a}}]}]":                                "remove a says why",
		"versions: [{name: v1}, {name: v1beta1, changes: [{}]}]":                                                  "changes[0]: one of move, compute or remove",
		"versions: [{name: v1}, {name: v1beta1, changes: [{move: {from: 'a[0]', to: b}}]}]":                       `"a[0]": a field is a dotted path`,
		"versions: [{name: v1}, {name: v1beta1, changes: [{compute: {to: a, from: [b], expression: 'self.b'}}]}]": "has a back expression for each of its from fields",
	} {
		k, err := Parse([]byte(decl))
		if err != nil {
			t.Fatal(err)
		}
		err = k.CheckVersions("v1")
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", decl, err, want)
		}
	}
	if _, err := Compile(&Kind{Versions: []Version{{Name: "v1"}, {Name: "v1beta1", Changes: []Change{{Compute: &Compute{To: "a",
		From: []string{"b"}, Expression: Expr{Source: "self.b +", Line: 7}, Back: map[string]Expr{"b": {Source: "self.a", Line: 8}}}}}}}}); err == nil ||
		!strings.Contains(err.Error(), "kind.yaml:7: versions[v1beta1].compute a") {
		t.Errorf("a compute expression that does not compile: %v", err)
	}
}

// A kept field's path gives back the keys it was made of, whatever they hold (dots, backslashes,
// nothing), and a declared path splits at its dots.
func FuzzKeptPaths(f *testing.F) {
	for _, seed := range []string{"tls.secretName", "hosts\x00a.example.com\x00minVersion", `a\b.\x00`, "\x00", ""} {
		f.Add(seed)
	}
	if got := keysOf("tls.secretName"); !reflect.DeepEqual(got, []string{"tls", "secretName"}) {
		f.Errorf("keysOf(tls.secretName) = %q", got)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		keys := strings.Split(joined, "\x00")
		if got := keysOf(pathOf(keys)); !reflect.DeepEqual(got, keys) {
			t.Errorf("keysOf(pathOf(%q)) = %q", keys, got)
		}
	})
}
