package daemonpod

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/nodepod"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestPodSpec: the pod Launch creates, field by field. This spec is the
// least-privilege contract the chart's admission policy enforces.
func TestPodSpec(t *testing.T) {
	for _, tc := range []struct {
		name       string
		privileged bool
		want       *corev1.SecurityContext
	}{
		{"unprivileged", false, &corev1.SecurityContext{
			RunAsUser:                ptr(int64(0)),
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   ptr(true),
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}},
		{"privileged", true, &corev1.SecurityContext{Privileged: ptr(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPI(t)
			c := testConfig(a)
			c.Privileged = tc.privileged
			l := newLauncher(t, c)
			launch := launchOf("claim-1234-0")
			h, err := l.Launch(testCtx(t), launch)
			if err != nil {
				t.Fatal(err)
			}
			pod := getPod(t, a, h)
			if want := testNS + "/" + PodName(testNode, "claim-1234-0"); h.Pod != want || h.PodUID != string(pod.UID) || h.PodUID == "" || h.PID != 0 {
				t.Errorf("handle %+v, want pod %s with UID %s", h, want, pod.UID)
			}
			wantLabels := map[string]string{LabelName: AppName, LabelManagedBy: ManagedBy, LabelDaemon: "claim-1234-0"}
			if !reflect.DeepEqual(pod.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", pod.Labels, wantLabels)
			}
			wantAnn := map[string]string{AnnotationID: "claim-1234-0", AnnotationDir: testRoot + "/claim-1234-0"}
			if !reflect.DeepEqual(pod.Annotations, wantAnn) {
				t.Errorf("annotations %v, want %v", pod.Annotations, wantAnn)
			}
			wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: testNode, UID: "node-uid", BlockOwnerDeletion: ptr(false)}}
			if !reflect.DeepEqual(pod.OwnerReferences, wantOwner) {
				t.Errorf("ownerReferences %+v, want %+v", pod.OwnerReferences, wantOwner)
			}
			s := pod.Spec
			for _, f := range []struct {
				field     string
				got, want any
			}{
				{"nodeName", s.NodeName, testNode},
				{"restartPolicy", s.RestartPolicy, corev1.RestartPolicyNever},
				{"serviceAccountName", s.ServiceAccountName, testSA},
				{"automountServiceAccountToken", deref(s.AutomountServiceAccountToken), false},
				{"enableServiceLinks", deref(s.EnableServiceLinks), false},
				{"hostNetwork", s.HostNetwork, false},
				{"hostPID", s.HostPID, false},
				{"hostIPC", s.HostIPC, false},
				{"priorityClassName", s.PriorityClassName, "system-node-critical"},
				{"tolerations", s.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
				{"initContainers", len(s.InitContainers), 0},
				{"ephemeralContainers", len(s.EphemeralContainers), 0},
				{"resourceClaims", len(s.ResourceClaims), 0},
				{"podSecurityContext", s.SecurityContext, (*corev1.PodSecurityContext)(nil)},
				{"volumes", s.Volumes, []corev1.Volume{{Name: volumeName, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: testRoot + "/claim-1234-0", Type: ptr(corev1.HostPathDirectory)}}}}},
				{"containers", len(s.Containers), 1},
			} {
				if !reflect.DeepEqual(f.got, f.want) {
					t.Errorf("spec.%s = %+v, want %+v", f.field, f.got, f.want)
				}
			}
			if len(s.Containers) != 1 {
				return
			}
			ct := s.Containers[0]
			for _, f := range []struct {
				field     string
				got, want any
			}{
				{"name", ct.Name, ContainerName},
				{"image", ct.Image, testImage},
				{"imagePullPolicy", ct.ImagePullPolicy, corev1.PullIfNotPresent},
				{"command", ct.Command, launch.Argv},
				{"args", len(ct.Args), 0},
				{"env", ct.Env, []corev1.EnvVar{
					{Name: "CUDA_MPS_LOG_DIRECTORY", Value: testRoot + "/claim-1234-0/log"},
					{Name: "CUDA_MPS_PIPE_DIRECTORY", Value: testRoot + "/claim-1234-0/pipe"},
					{Name: "CUDA_VISIBLE_DEVICES", Value: "GPU-a,GPU-b"},
					{Name: "TESSERA_MPS_DAEMON", Value: "claim-1234-0"},
				}},
				{"volumeMounts", ct.VolumeMounts, []corev1.VolumeMount{{Name: volumeName, MountPath: testRoot + "/claim-1234-0"}}},
				{"ports", len(ct.Ports), 0},
				{"securityContext", ct.SecurityContext, tc.want},
				{"resources", ct.Resources, corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}},
			} {
				if !reflect.DeepEqual(f.got, f.want) {
					t.Errorf("container %s = %+v, want %+v", f.field, f.got, f.want)
				}
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestPodName: one id on one node is always one name, a valid DNS-1123
// label whatever the id, and another node or id gives another name.
func TestPodName(t *testing.T) {
	long := strings.Repeat("x", 300)
	names := map[string]string{}
	for _, tc := range []struct{ node, id string }{
		{testNode, "claim-1"}, {testNode, "claim-2"}, {"gpu-node-2", "claim-1"},
		{testNode, long}, {testNode, "Claim_With:Odd/Chars"}, {long, "claim-1"},
	} {
		n := PodName(tc.node, tc.id)
		if n != PodName(tc.node, tc.id) {
			t.Errorf("PodName(%s, %s) is not stable", tc.node, tc.id)
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 || len(n) > 63 || !strings.HasPrefix(n, "tessera-mps-") {
			t.Errorf("PodName(%.20s, %.20s) = %q: %v", tc.node, tc.id, n, errs)
		}
		if prev, ok := names[n]; ok {
			t.Errorf("PodName(%.20s, %.20s) = %q, as for %s", tc.node, tc.id, n, prev)
		}
		names[n] = tc.node + "/" + tc.id
	}
}

// TestIDLabel: an id that is no valid label value is only in the
// annotation; the pod is still created and found.
func TestIDLabel(t *testing.T) {
	for _, id := range []string{strings.Repeat("a", 64), "claim:0", "-claim"} {
		a := newAPI(t)
		l := newLauncher(t, testConfig(a))
		h, err := l.Launch(testCtx(t), launchOf(id))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		pod := getPod(t, a, h)
		if _, ok := pod.Labels[LabelDaemon]; ok {
			t.Errorf("%s: labelled %s=%q, not a valid label value", id, LabelDaemon, pod.Labels[LabelDaemon])
		}
		if pod.Annotations[AnnotationID] != id {
			t.Errorf("%s: annotation %q", id, pod.Annotations[AnnotationID])
		}
		found, err := l.Find(testCtx(t), testRoot)
		if err != nil || len(found) != 1 || found[0].ID != id {
			t.Errorf("%s: Find = %+v, %v", id, found, err)
		}
	}
}

func TestNewRequires(t *testing.T) {
	a := newAPI(t)
	for field, clear := range map[string]func(*Config){
		"namespace":       func(c *Config) { c.Namespace = "" },
		"node name":       func(c *Config) { c.NodeName = "" },
		"image":           func(c *Config) { c.Image = "" },
		"service account": func(c *Config) { c.ServiceAccount = "" },
		"client":          func(c *Config) { c.Client = nil },
	} {
		c := testConfig(a)
		clear(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "no "+field) {
			t.Errorf("without %s: %v", field, err)
		}
	}
	l := newLauncher(t, Config{Client: a, Settings: nodepod.Settings{Namespace: testNS, NodeName: testNode, Image: testImage, ServiceAccount: testSA}})
	if l.c.Timeout <= 0 || l.c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("defaults: timeout %s, pull policy %q", l.c.Timeout, l.c.ImagePullPolicy)
	}
}
