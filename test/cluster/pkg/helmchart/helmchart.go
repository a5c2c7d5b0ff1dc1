// Package helmchart lints and renders the Tessera chart
// (deployments/helm/tessera) with the helm that hack/build-cluster-bins.sh
// builds, and decodes what it renders, for the chart tests and the e2e suite.
package helmchart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// KubeVersion is the Kubernetes version the chart is rendered for (helm's
// --kube-version, which the templates read as .Capabilities.KubeVersion):
// the local cluster's, k8s.io/kubernetes of test/go.mod (a test checks).
// Without it helm assumes a version of its own.
const KubeVersion = "v1.37.2"

// Chart is the chart of one repository checkout and the helm to run on it.
type Chart struct {
	Helm string // the helm binary
	Dir  string // the chart directory
	// KubeVersion overrides the package's KubeVersion when set.
	KubeVersion string
	// APIVersions are API versions the render assumes the cluster serves
	// beyond helm's own (--api-versions), such as monitoring.coreos.com/v1.
	APIVersions []string
}

// apiVersionFlags: --api-versions for each of APIVersions.
func (c *Chart) apiVersionFlags() []string {
	var flags []string
	for _, v := range c.APIVersions {
		flags = append(flags, "--api-versions", v)
	}
	return flags
}

func (c *Chart) kubeVersion() string {
	if c.KubeVersion != "" {
		return c.KubeVersion
	}
	return KubeVersion
}

// ForRepo: the chart in repo and _output/cluster-bin/helm.
func ForRepo(repo string) (*Chart, error) {
	c := &Chart{
		Helm: filepath.Join(repo, "_output/cluster-bin/helm"),
		Dir:  filepath.Join(repo, "deployments/helm/tessera"),
	}
	if _, err := os.Stat(c.Helm); err != nil {
		return nil, fmt.Errorf("helm: %w (make cluster-bins builds it)", err)
	}
	return c, nil
}

func (c *Chart) run(args ...string) ([]byte, error) {
	cmd := exec.Command(c.Helm, args...)
	// A helm of its own: no user configuration, cache or plugins.
	home, err := os.MkdirTemp("", "helm-home")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// setFlag is the helm flag of one value: --set, or --set-json for a value
// given as "json:key=JSON" (what --set cannot say, such as an empty list).
func setFlag(s string) []string {
	if js, ok := strings.CutPrefix(s, "json:"); ok {
		return []string{"--set-json", js}
	}
	return []string{"--set", s}
}

// Lint runs `helm lint --strict` with the given --set values.
func (c *Chart) Lint(sets ...string) (string, error) {
	args := append([]string{"lint", "--strict", c.Dir, "--kube-version", c.kubeVersion()}, c.apiVersionFlags()...)
	for _, s := range sets {
		args = append(args, setFlag(s)...)
	}
	out, err := c.run(args...)
	return string(out), err
}

// Template renders the chart as release "tessera" in namespace with the
// given --set values and returns the YAML stream.
func (c *Chart) Template(namespace string, sets ...string) ([]byte, error) {
	var flags []string
	for _, s := range sets {
		flags = append(flags, setFlag(s)...)
	}
	return c.template("tessera", namespace, flags...)
}

// template renders release in namespace for KubeVersion, with more flags.
func (c *Chart) template(release, namespace string, flags ...string) ([]byte, error) {
	args := append([]string{"template", release, c.Dir, "--namespace", namespace, "--kube-version", c.kubeVersion()}, c.apiVersionFlags()...)
	return c.run(append(args, flags...)...)
}

// TemplateOnCluster renders the chart as release in namespace the way an
// install or upgrade does: helm's lookup reads the cluster of kubeconfig
// (`helm template --dry-run=server`), which also refuses objects another
// release or no release owns.
func (c *Chart) TemplateOnCluster(kubeconfig, release, namespace string, sets ...string) ([]byte, error) {
	args := []string{"template", release, c.Dir, "--namespace", namespace, "--dry-run=server", "--kubeconfig", kubeconfig}
	for _, s := range sets {
		args = append(args, setFlag(s)...)
	}
	return c.run(args...)
}

// RenderValues renders the chart as release in namespace with a values
// file, as Install would, decoded: the release's objects, not its hooks.
func (c *Chart) RenderValues(release, namespace, values string) ([]*unstructured.Unstructured, error) {
	data, err := c.template(release, namespace, "--values", values)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(data)
	return withoutHooks(objs), err
}

// Render is Template, decoded: the release's objects, not its hooks
// (RenderHooks).
func (c *Chart) Render(namespace string, sets ...string) ([]*unstructured.Unstructured, error) {
	data, err := c.Template(namespace, sets...)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(data)
	return withoutHooks(objs), err
}

// RenderHooks is Template, decoded: only the hooks (objects Helm creates
// at an event, such as pre-delete, not with the release).
func (c *Chart) RenderHooks(namespace string, sets ...string) ([]*unstructured.Unstructured, error) {
	data, err := c.Template(namespace, sets...)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(data)
	var hooks []*unstructured.Unstructured
	for _, o := range objs {
		if IsHook(o) {
			hooks = append(hooks, o)
		}
	}
	return hooks, err
}

// HookAnnotation marks a hook; its value names the events.
const HookAnnotation = "helm.sh/hook"

// IsHook: o is a Helm hook.
func IsHook(o *unstructured.Unstructured) bool {
	_, ok := o.GetAnnotations()[HookAnnotation]
	return ok
}

func withoutHooks(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !IsHook(o) {
			out = append(out, o)
		}
	}
	return out
}

// Decode reads a YAML stream of objects; empty documents are skipped.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// Find returns the objects of kind (and name, unless empty).
func Find(objs []*unstructured.Unstructured, kind, name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			out = append(out, o)
		}
	}
	return out
}

// Convert turns an object into its typed form (into must be a pointer).
func Convert(o *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true)
}

// Install installs the chart as release into namespace (created when
// missing) of the cluster of kubeconfig, with a values file.
func (c *Chart) Install(kubeconfig, release, namespace, values string) error {
	_, err := c.run("install", release, c.Dir, "--namespace", namespace, "--create-namespace",
		"--kubeconfig", kubeconfig, "--values", values)
	return err
}

// Upgrade upgrades release in namespace to this chart, keeping the values
// it was installed with (--reuse-values) and changing those of sets, as an
// operator's `helm upgrade --set` does. It does not wait for the rollout.
func (c *Chart) Upgrade(kubeconfig, release, namespace string, sets ...string) error {
	args := []string{"upgrade", release, c.Dir, "--namespace", namespace, "--kubeconfig", kubeconfig, "--reuse-values"}
	for _, s := range sets {
		args = append(args, setFlag(s)...)
	}
	_, err := c.run(args...)
	return err
}

// Uninstall runs `helm uninstall` of release in namespace, its hooks
// included, deleting dependents first (the agents' pods before the
// post-delete hooks) and waiting until its objects are gone, and returns
// helm's output (with the error when it fails).
func (c *Chart) Uninstall(kubeconfig, release, namespace string, timeout time.Duration) (string, error) {
	out, err := c.run("uninstall", release, "--namespace", namespace, "--kubeconfig", kubeconfig, "--cascade", "foreground", "--wait", "--timeout", timeout.String())
	return string(out), err
}
