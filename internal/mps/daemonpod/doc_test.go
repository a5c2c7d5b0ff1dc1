package daemonpod

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// securityDoc lists the daemon pod field by field ("The agent's pods").
const securityDoc = "../../../docs/security.md"

// TestDocumentedFields: every field the launcher sets on a daemon pod,
// privileged or not, is named by its path in docs/security.md's list of
// the daemon pod, which is what the chart's admission policy pins. A field
// added to the pod without a word there (and so, likely, without a rule in
// the policy) fails here.
func TestDocumentedFields(t *testing.T) {
	doc, err := os.ReadFile(filepath.FromSlash(securityDoc))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "The daemon pod, field by field")
	if start < 0 {
		t.Fatalf("%s has no list of the daemon pod's fields", securityDoc)
	}
	section = section[start:]
	if end := strings.Index(section, "\nThe tenants' side"); end > 0 {
		section = section[:end]
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:metadata|spec)\\.[A-Za-z0-9.\\[\\]]+)").FindAllStringSubmatch(section, -1) {
		named[m[1]] = true
	}
	for _, privileged := range []bool{false, true} {
		a := newAPI(t)
		c := testConfig(a)
		c.Privileged = privileged
		h, err := newLauncher(t, c).Launch(testCtx(t), launchOf("claim-1234-0"))
		if err != nil {
			t.Fatal(err)
		}
		pod := getPod(t, a, h)
		b, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, f := range setFields(m) {
			if !named[f] {
				missing = append(missing, f)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("privileged %v: the daemon pod sets %v, which %s's list of its fields does not name", privileged, missing, securityDoc)
		}
	}
}

// setFields are the paths of the fields a pod sets that the list names:
// metadata's and spec's own (not what an API server sets: uid, creation
// time, version, managed fields), and its one container's as
// spec.containers[0].<field>.
func setFields(pod map[string]any) []string {
	var out []string
	meta, _ := pod["metadata"].(map[string]any)
	for k := range meta {
		switch k {
		case "uid", "creationTimestamp", "resourceVersion", "managedFields":
			continue
		}
		out = append(out, "metadata."+k)
	}
	spec, _ := pod["spec"].(map[string]any)
	for k, v := range spec {
		if k != "containers" {
			out = append(out, "spec."+k)
			continue
		}
		for i, c := range v.([]any) {
			for f := range c.(map[string]any) {
				out = append(out, fmt.Sprintf("spec.containers[%d].%s", i, f))
			}
		}
	}
	return out
}
