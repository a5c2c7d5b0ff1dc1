package scenario

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ExpectAnnotation on a pod says what the demo should expect of it.
const ExpectAnnotation = "demo.tessera.dev/expect"

// AfterAnnotation on a PodGroup names another of the scenario: its pods
// are created once the other's run (a job that arrives while another
// holds the GPUs).
const AfterAnnotation = "demo.tessera.dev/after"

// ExpectsUnschedulable reports whether a pod is meant to stay Pending.
func ExpectsUnschedulable(p *corev1.Pod) bool {
	return p.Annotations[ExpectAnnotation] == "unschedulable"
}

// ExpectsPrepareFailure reports whether a pod is meant to be scheduled but
// have its claims refused by the node's driver (it stays ContainerCreating).
func ExpectsPrepareFailure(p *corev1.Pod) bool {
	return p.Annotations[ExpectAnnotation] == "prepare-fails"
}

// ExpectsRejected reports whether an object is meant to be refused by the
// API server (admission) when the scenario creates it.
func ExpectsRejected(o metav1.Object) bool {
	return o.GetAnnotations()[ExpectAnnotation] == "rejected"
}

// Comment returns the leading comment block of the scenario file.
func (sc *Scenario) Comment() string {
	data, err := os.ReadFile(sc.Path)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		lines = append(lines, strings.TrimSpace(strings.TrimPrefix(l, "#")))
	}
	return strings.Join(lines, " ")
}

// Asked summarises what the scenario requests, one line per request.
func (sc *Scenario) Asked() []string {
	var out []string
	for _, t := range sc.Templates {
		out = append(out, describeSpec("claim template "+t.Name, t.Spec.Spec)...)
	}
	for _, c := range sc.Claims {
		out = append(out, describeSpec("claim "+c.Name, c.Spec)...)
	}
	for _, p := range sc.Pods {
		for _, ctr := range p.Spec.Containers {
			for name, q := range ctr.Resources.Limits {
				if strings.Contains(string(name), "/") {
					out = append(out, fmt.Sprintf("pod %s: resources.limits %s: %s (extended resource)", p.Name, name, q.String()))
				}
			}
		}
		if len(p.Spec.ResourceClaims) == 0 && !hasExtended(p) {
			out = append(out, fmt.Sprintf("pod %s: no devices (CPU only)", p.Name))
		}
	}
	return out
}

func hasExtended(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		for name := range c.Resources.Limits {
			if strings.Contains(string(name), "/") {
				return true
			}
		}
	}
	return false
}

func describeSpec(what string, spec resourceapi.ResourceClaimSpec) []string {
	var out []string
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil {
			out = append(out, fmt.Sprintf("%s, request %s: %s%s", what, r.Name, describeExact(r.Exactly.DeviceClassName, r.Exactly.Count, r.Exactly.Selectors), describeCapacity(r.Exactly.Capacity)))
		}
		for i, s := range r.FirstAvailable {
			out = append(out, fmt.Sprintf("%s, request %s, choice %d (%s): %s", what, r.Name, i+1, s.Name, describeExact(s.DeviceClassName, s.Count, s.Selectors)))
		}
	}
	for _, c := range spec.Devices.Constraints {
		if c.MatchAttribute != nil {
			out = append(out, fmt.Sprintf("%s: all devices share %s", what, *c.MatchAttribute))
		}
		if c.DistinctAttribute != nil {
			out = append(out, fmt.Sprintf("%s: devices differ in %s", what, *c.DistinctAttribute))
		}
	}
	return out
}

// describeCapacity is what a request asks of each device's capacity.
func describeCapacity(c *resourceapi.CapacityRequirements) string {
	if c == nil || len(c.Requests) == 0 {
		return ""
	}
	var parts []string
	for name, q := range c.Requests {
		parts = append(parts, fmt.Sprintf("%s %s", q.String(), name))
	}
	sort.Strings(parts)
	return ", asking " + strings.Join(parts, " and ")
}

func describeExact(class string, count int64, sel []resourceapi.DeviceSelector) string {
	if count == 0 {
		count = 1
	}
	s := fmt.Sprintf("%d x %s", count, class)
	for _, x := range sel {
		if x.CEL != nil {
			s += " where " + strings.Join(strings.Fields(x.CEL.Expression), " ")
		}
	}
	return s
}

// Print writes a placement for people.
func (p *Placement) Print(w io.Writer) {
	fmt.Fprintf(w, "  landed: pod %s on node %s\n", p.Pod, p.Node)
	for _, c := range p.Claims {
		for _, d := range c.Devices {
			fmt.Fprintf(w, "    claim %s, request %s: %s/%s (%s)%s\n", c.Name, d.Request, d.Pool, d.Device, p.What[d.Pool+"/"+d.Device], shareOf(d))
		}
	}
	for _, ctr := range p.Containers {
		fmt.Fprintf(w, "  container %s got:\n", ctr.ContainerName)
		if len(ctr.Devices) == 0 {
			fmt.Fprintln(w, "    no devices")
		}
		for _, d := range ctr.Devices {
			fmt.Fprintf(w, "    device %-24s %s %d:%d\n", d.Path, d.Type, d.Major, d.Minor)
		}
		for _, e := range ctr.Env {
			if strings.HasPrefix(e, "NVIDIA_") || strings.HasPrefix(e, "TESSERA_") || strings.HasPrefix(e, "CUDA_") {
				fmt.Fprintf(w, "    env    %s\n", e)
			}
		}
		for _, m := range ctr.Mounts {
			// Mounts CDI added (the CRI's own are the runtime's business).
			if strings.HasPrefix(m.Destination, "/tmp/nvidia-mps") {
				fmt.Fprintf(w, "    mount  %s <- %s\n", m.Destination, m.Source)
			}
		}
		printMetadata(w, ctr)
	}
}

// Available reports whether any node publishes a device whose attribute
// attr has value, for scenarios that need hardware not every cluster has.
func Available(ctx context.Context, client kubernetes.Interface, attr, value string) (bool, error) {
	l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, s := range l.Items {
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[resourceapi.QualifiedName(attr)]; ok && a.StringValue != nil && *a.StringValue == value {
				return true, nil
			}
		}
	}
	return false, nil
}

// RequiresAnnotation on a pod names an attribute=value some published
// device must have, or node:label=value some node must carry, for the
// scenario to make sense on this cluster.
const RequiresAnnotation = "demo.tessera.dev/requires"

// Missing returns why the scenario cannot run on this cluster, or "".
func (sc *Scenario) Missing(ctx context.Context, client kubernetes.Interface) (string, error) {
	if len(sc.PodGroups) > 0 {
		served, err := ServesPodGroups(client)
		if err != nil {
			return "", err
		}
		if !served {
			return "the cluster does not serve PodGroups (scheduling.k8s.io/v1beta1; `make cluster-up WORKLOADS=1` turns the Workload API on)", nil
		}
	}
	for _, p := range sc.Pods {
		req, ok := p.Annotations[RequiresAnnotation]
		if !ok {
			continue
		}
		if label, ok := strings.CutPrefix(req, "node:"); ok {
			key, value, _ := strings.Cut(label, "=")
			l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: key + "=" + value})
			if err != nil {
				return "", err
			}
			if len(l.Items) == 0 {
				return fmt.Sprintf("no node is labelled %s=%s (add one, e.g. NODES=...,gpu-h100-dynamic=dgx-h100:dynamic)", key, value), nil
			}
			continue
		}
		attr, value, _ := strings.Cut(req, "=")
		found, err := Available(ctx, client, attr, value)
		if err != nil {
			return "", err
		}
		if !found {
			return fmt.Sprintf("no node publishes a device with %s %q (the scenario's description names the node that publishes it; add it with NODES=...,<node>=<profile>[:dynamic])", attr, value), nil
		}
	}
	return "", nil
}

// shareOf describes a share of a multi-allocatable device: what the claim
// consumed of it (memory, compute units), empty for a whole device.
func shareOf(d resourceapi.DeviceRequestAllocationResult) string {
	if d.ShareID == nil {
		return ""
	}
	mem, cu := d.ConsumedCapacity["memory"], d.ConsumedCapacity["computeUnits"]
	out := ", share of " + mem.String() + " memory"
	if !cu.IsZero() {
		out += ", " + cu.String() + " compute units"
	}
	return out
}

// ServesPodGroups reports whether the API server serves the Workload
// API's PodGroups, which Kubernetes 1.37 leaves off by default.
func ServesPodGroups(client kubernetes.Interface) (bool, error) {
	l, err := client.Discovery().ServerResourcesForGroupVersion(schedulingapi.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", schedulingapi.SchemeGroupVersion, err)
	}
	for _, r := range l.APIResources {
		if r.Name == "podgroups" {
			return true, nil
		}
	}
	return false, nil
}
