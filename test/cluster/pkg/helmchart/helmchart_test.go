package helmchart

import (
	"os"
	"regexp"
	"testing"
)

// TestKubeVersionIsTheClusters: the chart is rendered for the Kubernetes
// the local cluster runs, the k8s.io/kubernetes pin of test/go.mod.
func TestKubeVersionIsTheClusters(t *testing.T) {
	data, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("test/go.mod requires no k8s.io/kubernetes")
	}
	if string(m[1]) != KubeVersion {
		t.Errorf("KubeVersion %s, test/go.mod pins k8s.io/kubernetes %s", KubeVersion, m[1])
	}
}
