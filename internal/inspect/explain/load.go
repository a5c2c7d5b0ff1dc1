package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/deviceclasses"
	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
)

// Input is what explain reads: the Snapshot (slices and claims), the
// DeviceClasses the scheduler would use, and, to find a pod's claims, pods
// and ResourceClaimTemplates.
type Input struct {
	Snapshot *inspect.Snapshot
	Classes  []*resourceapi.DeviceClass
	// ShippedClasses is set when Classes are the DeviceClasses shipped with
	// Tessera (internal/deviceclasses) because the input had none.
	ShippedClasses bool
	Pods           []corev1.Pod
	Templates      []resourceapi.ResourceClaimTemplate
	// PodGroups are the Workload API's gangs (gang.go).
	PodGroups []schedulingapi.PodGroup
}

// LoadFiles reads what LoadFiles reads and also the DeviceClasses,
// Pods and ResourceClaimTemplates in the files. Without DeviceClasses in the
// files, the shipped ones are used. Each file (and stdin) is read once.
func LoadFiles(paths []string) (*Input, error) {
	s := &inspect.Snapshot{}
	in := &Input{Snapshot: s}
	for _, p := range paths {
		var data []byte
		var err error
		if p == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(p)
		}
		if err != nil {
			return nil, err
		}
		if err := s.Decode(p, bytes.NewReader(data)); err != nil {
			return nil, err
		}
		if err := in.decodeExtras(p, bytes.NewReader(data)); err != nil {
			return nil, err
		}
	}
	if len(s.Slices) == 0 {
		return nil, fmt.Errorf("no ResourceSlices of driver %s in %v", names.DriverName, paths)
	}
	s.Source = fmt.Sprint(paths)
	if len(in.Classes) == 0 {
		if err := in.useShippedClasses(); err != nil {
			return nil, err
		}
	}
	return in, nil
}

func (in *Input) useShippedClasses() error {
	classes, err := deviceclasses.Parse()
	if err != nil {
		return err
	}
	in.Classes, in.ShippedClasses = classes, true
	return nil
}

// decodeExtras adds the DeviceClasses, Pods and ResourceClaimTemplates of
// one stream (the slices and claims are Snapshot.decode's).
func (in *Input) decodeExtras(name string, r io.Reader) error {
	return inspect.DecodeStream(name, r, in.addExtra)
}

// addExtra adds one object of a stream if it is an extra (or a list's
// extras); the slices and claims are Snapshot.Decode's.
func (in *Input) addExtra(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil // Snapshot.Decode reports what is not an object
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil
	}
	switch tm.Kind {
	case "List", "DeviceClassList", "PodList", "ResourceClaimTemplateList", "PodGroupList":
		return in.addListItems(tm, raw)
	case "DeviceClass":
		return in.addDeviceClass(tm, raw)
	case "ResourceClaimTemplate":
		return in.addTemplate(tm, raw)
	case "Pod":
		return in.addPod(tm, raw)
	case "PodGroup":
		return in.addPodGroup(tm, raw)
	}
	return nil
}

// addPodGroup adds a PodGroup; only scheduling.k8s.io/v1beta1 is read.
func (in *Input) addPodGroup(tm metav1.TypeMeta, raw json.RawMessage) error {
	if tm.APIVersion != schedulingapi.SchemeGroupVersion.String() {
		return fmt.Errorf("PodGroup has apiVersion %q; only %s is read", tm.APIVersion, schedulingapi.SchemeGroupVersion)
	}
	var o schedulingapi.PodGroup
	if err := json.Unmarshal(raw, &o); err != nil {
		return fmt.Errorf("PodGroup: %w", err)
	}
	in.PodGroups = append(in.PodGroups, o)
	return nil
}

// addListItems adds the extras among a list's items.
func (in *Input) addListItems(tm metav1.TypeMeta, raw json.RawMessage) error {
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	for i, it := range l.Items {
		if err := in.addExtra(it); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
	}
	return nil
}

// addDeviceClass adds a DeviceClass; only resource.k8s.io/v1 is read.
func (in *Input) addDeviceClass(tm metav1.TypeMeta, raw json.RawMessage) error {
	if tm.APIVersion != resourceapi.SchemeGroupVersion.String() {
		return fmt.Errorf("DeviceClass has apiVersion %q; only %s is read", tm.APIVersion, resourceapi.SchemeGroupVersion)
	}
	var o resourceapi.DeviceClass
	if err := json.Unmarshal(raw, &o); err != nil {
		return fmt.Errorf("DeviceClass: %w", err)
	}
	in.Classes = append(in.Classes, &o)
	return nil
}

// addTemplate adds a ResourceClaimTemplate; only resource.k8s.io/v1 is read.
func (in *Input) addTemplate(tm metav1.TypeMeta, raw json.RawMessage) error {
	if tm.APIVersion != resourceapi.SchemeGroupVersion.String() {
		return fmt.Errorf("ResourceClaimTemplate has apiVersion %q; only %s is read", tm.APIVersion, resourceapi.SchemeGroupVersion)
	}
	var o resourceapi.ResourceClaimTemplate
	if err := json.Unmarshal(raw, &o); err != nil {
		return fmt.Errorf("ResourceClaimTemplate: %w", err)
	}
	in.Templates = append(in.Templates, o)
	return nil
}

// addPod adds a core v1 Pod; an object of another group that calls itself
// Pod is not one.
func (in *Input) addPod(tm metav1.TypeMeta, raw json.RawMessage) error {
	if tm.APIVersion != "v1" {
		return nil
	}
	var o corev1.Pod
	if err := json.Unmarshal(raw, &o); err != nil {
		return fmt.Errorf("Pod: %w", err)
	}
	in.Pods = append(in.Pods, o)
	return nil
}

// InputFromCluster adds to s (FromCluster's) the cluster's
// DeviceClasses and, when target names a pod (pod/NAME), that pod and the
// ResourceClaimTemplates it names. It only reads.
func InputFromCluster(ctx context.Context, c kubernetes.Interface, s *inspect.Snapshot, namespace, target string) (*Input, error) {
	in := &Input{Snapshot: s}
	classes, err := c.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing DeviceClasses: %w", err)
	}
	for i := range classes.Items {
		in.Classes = append(in.Classes, &classes.Items[i])
	}
	group, isGroup := podGroupName(target)
	if pod, ok := podName(target); ok {
		p, err := c.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting pod %s/%s: %w", namespace, pod, err)
		}
		in.Pods = append(in.Pods, *p)
		group, isGroup = groupOf(p), groupOf(p) != ""
	}
	if isGroup {
		if err := in.addGroupFromCluster(ctx, c, namespace, group); err != nil {
			return nil, err
		}
	}
	seen := sets.New[string]()
	for _, p := range in.Pods {
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName == nil || seen.Has(*rc.ResourceClaimTemplateName) {
				continue
			}
			seen.Insert(*rc.ResourceClaimTemplateName)
			t, err := c.ResourceV1().ResourceClaimTemplates(namespace).Get(ctx, *rc.ResourceClaimTemplateName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("getting ResourceClaimTemplate %s/%s: %w", namespace, *rc.ResourceClaimTemplateName, err)
			}
			in.Templates = append(in.Templates, *t)
		}
	}
	return in, nil
}

// addGroupFromCluster adds the PodGroup and its pods (those of namespace
// naming it in spec.schedulingGroup).
func (in *Input) addGroupFromCluster(ctx context.Context, c kubernetes.Interface, namespace, group string) error {
	g, err := c.SchedulingV1beta1().PodGroups(namespace).Get(ctx, group, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting PodGroup %s/%s: %w", namespace, group, err)
	}
	in.PodGroups = append(in.PodGroups, *g)
	pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods of PodGroup %s/%s: %w", namespace, group, err)
	}
	for _, p := range pods.Items {
		if groupOf(&p) == group && !slices.ContainsFunc(in.Pods, func(q corev1.Pod) bool { return q.Name == p.Name }) {
			in.Pods = append(in.Pods, p)
		}
	}
	return nil
}

// podName reports whether target is pod/NAME (or pods/NAME, po/NAME).
func podName(target string) (string, bool) {
	kind, name, ok := strings.Cut(target, "/")
	if !ok {
		return "", false
	}
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		return name, true
	}
	return "", false
}

// claimName strips resourceclaim/ (and its short forms) off a claim target.
func claimName(target string) (string, error) {
	kind, name, ok := strings.Cut(target, "/")
	if !ok {
		return target, nil
	}
	switch strings.ToLower(kind) {
	case "resourceclaim", "resourceclaims", "resourceclaim.resource.k8s.io":
		return name, nil
	}
	return "", fmt.Errorf("%q: explain takes a ResourceClaim name or pod/NAME", target)
}

// Resolve finds the claims target stands for: the claim of that name in
// namespace, or for pod/NAME the pod's claims. A pod's claim made from a
// template is the one pod.status.resourceClaimStatuses names; until it
// exists it is built from the template (as the resourceclaim controller
// would). Namespace "" matches any namespace when only one object fits.
func (in *Input) Resolve(namespace, target string) (pod string, claims []*resourceapi.ResourceClaim, err error) {
	if p, ok := podName(target); ok {
		claims, err := in.podClaims(namespace, p)
		return p, claims, err
	}
	name, err := claimName(target)
	if err != nil {
		return "", nil, err
	}
	c, err := in.claim(namespace, name)
	if err != nil {
		return "", nil, err
	}
	return "", []*resourceapi.ResourceClaim{c}, nil
}

func (in *Input) claim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	var found []*resourceapi.ResourceClaim
	for i := range in.Snapshot.Claims {
		c := &in.Snapshot.Claims[i]
		if c.Name == name && (namespace == "" || c.Namespace == namespace || c.Namespace == "") {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		if namespace == "" {
			return nil, fmt.Errorf("ResourceClaim %s not found in %s", name, in.Snapshot.Source)
		}
		return nil, fmt.Errorf("ResourceClaim %s/%s not found in %s", namespace, name, in.Snapshot.Source)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("ResourceClaim %s is in several namespaces; name one with -n", name)
}

func (in *Input) podClaims(namespace, name string) ([]*resourceapi.ResourceClaim, error) {
	var pods []*corev1.Pod
	for i := range in.Pods {
		p := &in.Pods[i]
		if p.Name == name && (namespace == "" || p.Namespace == namespace || p.Namespace == "") {
			pods = append(pods, p)
		}
	}
	switch len(pods) {
	case 0:
		return nil, fmt.Errorf("pod %s not found", name)
	case 1:
	default:
		return nil, fmt.Errorf("pod %s is in several namespaces; name one with -n", name)
	}
	p := pods[0]
	ns := p.Namespace
	if ns == "" {
		ns = namespace
	}
	var out []*resourceapi.ResourceClaim
	for _, rc := range p.Spec.ResourceClaims {
		switch {
		case rc.ResourceClaimName != nil:
			c, err := in.claim(ns, *rc.ResourceClaimName)
			if err != nil {
				return nil, fmt.Errorf("pod %s, claim %s: %w", name, rc.Name, err)
			}
			out = append(out, c)
		case rc.ResourceClaimTemplateName != nil:
			c, err := in.generatedClaim(p, ns, rc.Name, *rc.ResourceClaimTemplateName)
			if err != nil {
				return nil, fmt.Errorf("pod %s, claim %s: %w", name, rc.Name, err)
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pod %s has no resourceClaims", name)
	}
	return out, nil
}

// generatedClaim is the claim made for a pod from a template: the one the
// pod's status names, else one built from the template.
func (in *Input) generatedClaim(p *corev1.Pod, ns, entry, template string) (*resourceapi.ResourceClaim, error) {
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.Name == entry && st.ResourceClaimName != nil {
			return in.claim(ns, *st.ResourceClaimName)
		}
	}
	// A pod-group claim: the group's, one for all its pods.
	owner := p.Name
	if g := in.podGroup(ns, groupOf(p)); g != nil && slices.ContainsFunc(g.Spec.ResourceClaims, func(rc schedulingapi.PodGroupResourceClaim) bool {
		return rc.Name == entry && rc.ResourceClaimTemplateName != nil && *rc.ResourceClaimTemplateName == template
	}) {
		for _, st := range g.Status.ResourceClaimStatuses {
			if st.Name == entry && st.ResourceClaimName != nil {
				return in.claim(ns, *st.ResourceClaimName)
			}
		}
		owner = g.Name
	}
	// Not created yet (or given offline): build it from the template.
	i := slices.IndexFunc(in.Templates, func(t resourceapi.ResourceClaimTemplate) bool {
		return t.Name == template && (t.Namespace == "" || ns == "" || t.Namespace == ns)
	})
	if i < 0 {
		return nil, fmt.Errorf("the claim generated from ResourceClaimTemplate %s is not in pod.status.resourceClaimStatuses and the template is not found", template)
	}
	t := &in.Templates[i]
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: owner + "-" + entry, Namespace: ns, Labels: t.Spec.Labels, Annotations: t.Spec.Annotations},
		Spec:       *t.Spec.Spec.DeepCopy(),
	}
	return c, nil
}
