// Package scenario applies the demo/ scenario files to a local cluster and
// reports what happened to them: where each pod landed, which devices its
// claims got, and what its containers received from the fake runtime. The
// demo prints it; the end-to-end tests assert on it.
package scenario

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/record"
)

var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = resourceapi.AddToScheme(s)
	_ = schedulingapi.AddToScheme(s)
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// Scenario is one demo file's objects.
type Scenario struct {
	Path      string
	Pods      []*corev1.Pod
	Templates []*resourceapi.ResourceClaimTemplate
	Claims    []*resourceapi.ResourceClaim
	// PodGroups are gangs (the Workload API): their pods name them in
	// spec.schedulingGroup.
	PodGroups []*schedulingapi.PodGroup
	// Rejected is filled by Apply: for each object annotated to be refused
	// at admission ("kind name"), the API server's message.
	Rejected map[string]string
}

// Load reads a scenario file: Pods, ResourceClaimTemplates, ResourceClaims
// and PodGroups.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc := &Scenario{Path: path}
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return sc, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			if runtime.IsMissingKind(err) {
				continue // a comment-only document
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		switch o := obj.(type) {
		case *corev1.Pod:
			sc.Pods = append(sc.Pods, o)
		case *resourceapi.ResourceClaimTemplate:
			sc.Templates = append(sc.Templates, o)
		case *resourceapi.ResourceClaim:
			sc.Claims = append(sc.Claims, o)
		case *schedulingapi.PodGroup:
			sc.PodGroups = append(sc.PodGroups, o)
		default:
			return nil, fmt.Errorf("%s: unsupported kind %T", path, obj)
		}
	}
}

// Apply creates the scenario's objects in namespace ns. An object
// annotated to be rejected must be refused by the API server; its message
// goes into sc.Rejected.
//
// A scenario whose claims ask admin access gets ns labelled for it first
// (AllowAdminAccess).
func (sc *Scenario) Apply(ctx context.Context, client kubernetes.Interface, ns string) error {
	sc.Rejected = map[string]string{}
	if sc.AsksAdminAccess() {
		if err := AllowAdminAccess(ctx, client, ns); err != nil {
			return err
		}
	}
	for _, t := range sc.Templates {
		_, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, t.DeepCopy(), metav1.CreateOptions{})
		if err := sc.created("ResourceClaimTemplate", t, err); err != nil {
			return err
		}
	}
	for _, c := range sc.Claims {
		_, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, c.DeepCopy(), metav1.CreateOptions{})
		if err := sc.created("ResourceClaim", c, err); err != nil {
			return err
		}
	}
	for _, g := range sc.PodGroups {
		_, err := client.SchedulingV1beta1().PodGroups(ns).Create(ctx, g.DeepCopy(), metav1.CreateOptions{})
		if err := sc.created("PodGroup", g, err); err != nil {
			return err
		}
	}
	// Pods of a group that comes after another are created once that
	// group's pods run (AfterAnnotation).
	after := map[string]string{}
	for _, g := range sc.PodGroups {
		if a := g.Annotations[AfterAnnotation]; a != "" {
			after[g.Name] = a
		}
	}
	var later []*corev1.Pod
	hand := sc.handAllocated()
	for _, p := range sc.Pods {
		if namesClaim(p, hand) != "" {
			continue // created with its claim's allocation (applyHandAllocated)
		}
		if after[GroupOf(p)] != "" {
			later = append(later, p)
			continue
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Pod %s: %w", p.Name, err)
		}
	}
	for _, p := range later {
		first := after[GroupOf(p)]
		var names []string
		for _, q := range sc.Pods {
			if GroupOf(q) == first {
				names = append(names, q.Name)
			}
		}
		if err := WaitRunning(ctx, client, ns, names, 120*time.Second); err != nil {
			return fmt.Errorf("PodGroup %s comes after %s, whose pods do not run: %w", GroupOf(p), first, err)
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Pod %s: %w", p.Name, err)
		}
	}
	return sc.applyHandAllocated(ctx, client, ns)
}

// GroupOf is the PodGroup a pod belongs to, "" for none.
func GroupOf(p *corev1.Pod) string {
	if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
		return ""
	}
	return *p.Spec.SchedulingGroup.PodGroupName
}

// created checks the outcome of creating o against what it expects.
func (sc *Scenario) created(kind string, o metav1.Object, err error) error {
	switch {
	case ExpectsRejected(o) && err == nil:
		return fmt.Errorf("create %s %s: admitted, but the scenario expects the API server to refuse it", kind, o.GetName())
	case ExpectsRejected(o):
		sc.Rejected[kind+" "+o.GetName()] = err.Error()
	case err != nil:
		return fmt.Errorf("create %s %s: %w", kind, o.GetName(), err)
	}
	return nil
}

// WaitPrepareFailed waits for the kubelet to report that it could not
// prepare a pod's claims and returns the event's message (the driver's
// error).
func WaitPrepareFailed(ctx context.Context, client kubernetes.Interface, ns, pod string, timeout time.Duration) (string, error) {
	var msg string
	err := Poll(ctx, timeout, func() (bool, string) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=FailedPrepareDynamicResources"})
		if err != nil {
			return false, err.Error()
		}
		if len(evs.Items) == 0 {
			return false, "no FailedPrepareDynamicResources event yet"
		}
		msg = evs.Items[0].Message
		return true, ""
	})
	return msg, err
}

// Delete removes the scenario's objects and waits until the pods, their
// groups and the claims generated for either are gone (which means
// unprepared).
func (sc *Scenario) Delete(ctx context.Context, client kubernetes.Interface, ns string, timeout time.Duration) error {
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	for _, p := range sc.Pods {
		if err := client.CoreV1().Pods(ns).Delete(ctx, p.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, g := range sc.PodGroups {
		if err := client.SchedulingV1beta1().PodGroups(ns).Delete(ctx, g.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, c := range sc.Claims {
		if err := client.ResourceV1().ResourceClaims(ns).Delete(ctx, c.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, t := range sc.Templates {
		if err := client.ResourceV1().ResourceClaimTemplates(ns).Delete(ctx, t.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return Poll(ctx, timeout, func() (bool, string) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		groups := 0
		if len(sc.PodGroups) > 0 {
			l, err := client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			groups = len(l.Items)
		}
		return len(pods.Items) == 0 && len(claims.Items) == 0 && groups == 0, fmt.Sprintf("%d pods, %d claims, %d pod groups left", len(pods.Items), len(claims.Items), groups)
	})
}

// WaitRunning waits until every named pod is Running.
func WaitRunning(ctx context.Context, client kubernetes.Interface, ns string, names []string, timeout time.Duration) error {
	return Poll(ctx, timeout, func() (bool, string) {
		var waiting []string
		for _, n := range names {
			p, err := client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				waiting = append(waiting, n+": "+err.Error())
				continue
			}
			if p.Status.Phase != corev1.PodRunning {
				waiting = append(waiting, fmt.Sprintf("%s: %s %s", n, p.Status.Phase, podReason(p)))
			}
		}
		sort.Strings(waiting)
		return len(waiting) == 0, fmt.Sprint(waiting)
	})
}

// WaitUnschedulable waits for the scheduler to give up on a pod and returns its reason.
func WaitUnschedulable(ctx context.Context, client kubernetes.Interface, ns, name string, timeout time.Duration) (string, error) {
	var msg string
	err := Poll(ctx, timeout, func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				msg = c.Message
				return true, ""
			}
		}
		return false, "still " + string(p.Status.Phase)
	})
	return msg, err
}

func podReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return c.Message
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			return cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
		}
	}
	return ""
}

// Poll runs cond until it holds, ctx ends or timeout passes (see
// localcluster.Poll), for conditions that cannot fail outright.
func Poll(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	return localcluster.Poll(ctx, timeout, func() (bool, string, error) {
		ok, msg := cond()
		return ok, msg, nil
	})
}

// Placement is where one pod landed and what it got.
type Placement struct {
	Pod    string
	Node   string
	Claims []ClaimAllocation
	// Containers are the fake runtime's records for the pod's containers.
	Containers []*record.Container
	// What describes each allocated device ("pool/device") for people:
	// vendor, model and profile from its published attributes.
	What map[string]string
	// UUID is each allocated whole GPU's (or partition's) uuid attribute.
	UUID map[string]string
}

// ClaimAllocation is one claim of a pod and its allocated devices.
type ClaimAllocation struct {
	Name    string
	Devices []resourceapi.DeviceRequestAllocationResult
}

// Describe reports where pod landed; recordDir maps a node to its fake
// runtime's record directory.
func Describe(ctx context.Context, client kubernetes.Interface, ns, pod string, recordDir func(node string) string) (*Placement, error) {
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := &Placement{Pod: pod, Node: p.Spec.NodeName, What: map[string]string{}, UUID: map[string]string{}}
	// Claims the pod names directly (shared with other pods), then those
	// generated for it from templates.
	var claimNames []string
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			claimNames = append(claimNames, *rc.ResourceClaimName)
		}
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			claimNames = append(claimNames, *s.ResourceClaimName)
		}
	}
	if p.Status.ExtendedResourceClaimStatus != nil {
		claimNames = append(claimNames, p.Status.ExtendedResourceClaimStatus.ResourceClaimName)
	}
	for _, name := range claimNames {
		c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("claim %s of pod %s: %w", name, pod, err)
		}
		ca := ClaimAllocation{Name: name}
		if c.Status.Allocation != nil {
			ca.Devices = c.Status.Allocation.Devices.Results
			if err := describeDevices(ctx, client, ca.Devices, out.What, out.UUID); err != nil {
				return nil, err
			}
		}
		out.Claims = append(out.Claims, ca)
	}
	if out.Node != "" {
		for _, ctr := range p.Spec.Containers {
			rec, err := record.Read(recordDir(out.Node), ns, pod, ctr.Name)
			if err != nil {
				return nil, fmt.Errorf("container %s of pod %s: %w", ctr.Name, pod, err)
			}
			out.Containers = append(out.Containers, rec)
		}
	}
	return out, nil
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

func describeDevices(ctx context.Context, client kubernetes.Interface, devs []resourceapi.DeviceRequestAllocationResult, what, uuids map[string]string) error {
	for _, d := range devs {
		l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + d.Pool})
		if err != nil {
			return err
		}
		for _, s := range l.Items {
			for _, dev := range s.Spec.Devices {
				if dev.Name != d.Device {
					continue
				}
				var parts []string
				for _, a := range []resourceapi.QualifiedName{"vendor", "model", "profile"} {
					if v := dev.Attributes[a].StringValue; v != nil {
						parts = append(parts, *v)
					}
				}
				if m, ok := dev.Capacity["memory"]; ok {
					parts = append(parts, m.Value.String())
				}
				what[d.Pool+"/"+d.Device] = strings.Join(parts, " ")
				if u := dev.Attributes["uuid"].StringValue; u != nil {
					uuids[d.Pool+"/"+d.Device] = *u
				}
			}
		}
	}
	return nil
}

// UseImage runs every container of the scenario's pods from ref, which must
// already be on the nodes (pull policy Never): on containerd nodes the demo
// pods run the probe image, which shows what each container was given.
func (sc *Scenario) UseImage(ref string) {
	for _, p := range sc.Pods {
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range cs {
				cs[i].Image, cs[i].ImagePullPolicy = ref, corev1.PullNever
			}
		}
	}
}
