package chart

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/daemonpods"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/imexdaemonpods"
)

// TestIMEXDaemonObjects: with imex.daemons=pod (and channels) the agent
// gets list on nodes, the daemon pods' ServiceAccount and Role even
// without MPS daemon pods, its IMEX flags and directory, and the policy;
// without, none of it.
func TestIMEXDaemonObjects(t *testing.T) {
	for _, tc := range []struct {
		sets        []string
		policy, sa  bool
		listNodes   bool
		daemonsFlag string
	}{
		{[]string{"imex.channels=64", "imex.daemons=pod"}, true, true, true, "pod"},
		{[]string{"imex.channels=64", "imex.daemons=pod", "mps.daemons=process"}, true, true, true, "pod"},
		{[]string{"imex.channels=64"}, false, true, false, "host"},
		{[]string{"imex.daemons=pod"}, false, true, false, ""},
		{[]string{"imex.channels=64", "imex.daemons=pod", "admissionPolicy.enabled=false"}, false, true, true, "pod"},
		{[]string{"imex.channels=64", "imex.daemons=host", "mps.daemons=process"}, false, false, false, "host"},
	} {
		objs := render(t, tc.sets...)
		has := func(kind, name string) bool { return slices.Contains(kinds(objs), kind+"/"+name) }
		if got := has("ValidatingAdmissionPolicy", "tessera-imex-daemon") && has("ValidatingAdmissionPolicyBinding", "tessera-imex-daemon"); got != tc.policy {
			t.Errorf("%v: policy rendered %v, want %v", tc.sets, got, tc.policy)
		}
		if got := has("ServiceAccount", "tessera-mps-daemon") && has("Role", "tessera-mps-daemons"); got != tc.sa {
			t.Errorf("%v: daemon pods' ServiceAccount and Role %v, want %v", tc.sets, got, tc.sa)
		}
		cr := one[rbacv1.ClusterRole](t, objs, "ClusterRole", "tessera")
		list := false
		for _, r := range cr.Rules {
			if slices.Contains(r.Resources, "nodes") && slices.Contains(r.Verbs, "list") {
				list = true
			}
			if slices.Contains(r.Resources, "nodes") && slices.Contains(r.Verbs, "watch") {
				t.Errorf("%v: the agent may watch nodes", tc.sets)
			}
		}
		if list != tc.listNodes {
			t.Errorf("%v: list nodes %v, want %v", tc.sets, list, tc.listNodes)
		}
		ds, c := daemonSet(t, objs)
		e := env(c)
		if e["TESSERA_IMEX_DAEMONS"] != tc.daemonsFlag {
			t.Errorf("%v: TESSERA_IMEX_DAEMONS=%q, want %q", tc.sets, e["TESSERA_IMEX_DAEMONS"], tc.daemonsFlag)
		}
		pod := tc.daemonsFlag == "pod"
		if (e["TESSERA_IMEX_DAEMON_DIR"] == "/var/run/tessera/imex") != pod || (e["TESSERA_MPS_DAEMON_IMAGE"] == c.Image) != tc.sa {
			t.Errorf("%v: IMEX directory %q, daemon image %q", tc.sets, e["TESSERA_IMEX_DAEMON_DIR"], e["TESSERA_MPS_DAEMON_IMAGE"])
		}
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/var/run/tessera/imex" }) &&
			slices.ContainsFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
				return v.HostPath != nil && v.HostPath.Path == "/var/run/tessera/imex"
			})
		if mounted != pod {
			t.Errorf("%v: IMEX directory mounted %v", tc.sets, mounted)
		}
	}
	if _, err := chart(t).Render(ns, "imex.daemons=container"); err == nil || !strings.Contains(err.Error(), "imex.daemons must be host or pod") {
		t.Errorf("imex.daemons=container: %v", err)
	}
	if _, err := chart(t).Render(ns, "imex.channels=8", "nodeGroups[0].name=a", "nodeGroups[0].nodeSelector.a=b", "nodeGroups[0].imex.channels=9"); err == nil || !strings.Contains(err.Error(), "only imex.address") {
		t.Errorf("a node group's own channel count: %v", err)
	}
	objs := render(t, "imex.channels=8", "imex.daemons=pod", "nodeGroups[0].name=tray-1", "nodeGroups[0].nodeSelector.tray=one", "nodeGroups[0].imex.address=127.0.0.2")
	ds := one[appsv1.DaemonSet](t, objs, "DaemonSet", "tessera-tray-1")
	if e := env(&ds.Spec.Template.Spec.Containers[0]); e["TESSERA_IMEX_ADDRESS"] != "127.0.0.2" {
		t.Errorf("a node group's IMEX address: %q", e["TESSERA_IMEX_ADDRESS"])
	}
}

// TestIMEXDaemonPolicy evaluates the rendered policies with Kubernetes'
// CEL on the pod the agent builds and on every hostile variant of
// imexdaemonpods.Hostile: each refused, naming what it must not do. The
// MPS daemons' policy leaves the IMEX pod to this one, and this one the
// MPS pods to that; without MPS daemon pods this one refuses every other
// pod the agent asks for.
func TestIMEXDaemonPolicy(t *testing.T) {
	const agent = "system:serviceaccount:" + ns + ":tessera"
	const node = "tray-1"
	for _, tc := range []struct {
		sets []string
		dir  string
	}{
		{nil, "/var/run/tessera/imex"},
		{[]string{"backend=sim"}, "/var/run/tessera/sim/" + node + "/imex"},
		{[]string{"backend=sim", "sim.stateDir=/srv/sim"}, "/srv/sim/imex"},
		// The sim's MPS stand-in may come from a driver root; its IMEX
		// stand-in is the image's.
		{[]string{"backend=sim", "sim.driverRoot=/var/lib/tessera/sim-driver"}, "/var/run/tessera/sim/" + node + "/imex"},
		{[]string{"backend=nvml", "nvidiaDriverRoot=/run/nvidia/driver", "imex.daemonDir=/run/imex"}, "/run/imex"},
		{[]string{"backend=nvml", "mps.daemonPod.privileged=false", "mps.daemons=process"}, "/var/run/tessera/imex"},
	} {
		t.Run(strings.Join(append([]string{"defaults"}, tc.sets...), ","), func(t *testing.T) {
			objs := render(t, append([]string{"imex.channels=64", "imex.daemons=pod"}, tc.sets...)...)
			p := compilePolicy(t, one[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "tessera-imex-daemon"))
			_, c := daemonSet(t, objs)
			e := env(c)
			if e["TESSERA_BACKEND"] != "sim" && e["TESSERA_IMEX_DAEMON_DIR"] != tc.dir {
				t.Fatalf("TESSERA_IMEX_DAEMON_DIR %q, want %q", e["TESSERA_IMEX_DAEMON_DIR"], tc.dir)
			}
			good, err := imexdaemonpods.Of(e, ns, node, tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if msg := p.admit(t, agent, node, "CREATE", good, nil); msg != "" {
				t.Fatalf("the agent's own IMEX daemon pod (command %q) is denied: %s", good.Spec.Containers[0].Command, msg)
			}
			if msg := p.admit(t, agent, node, "DELETE", nil, good); msg != "" {
				t.Errorf("delete of the node's daemon pod denied: %s", msg)
			}
			if msg := p.admit(t, agent, "tray-2", "CREATE", good, nil); !strings.Contains(msg, "spec.nodeName") {
				t.Errorf("the pod of tray-1 by tray-2's agent: %q", msg)
			}
			privileged := e["TESSERA_MPS_DAEMON_PRIVILEGED"] == "true"
			for _, h := range imexdaemonpods.Hostile(good, tc.dir, privileged, "other") {
				msg := p.admit(t, agent, node, "CREATE", h.Pod, nil)
				switch {
				case h.Field == "" && msg != "":
					t.Errorf("%s: denied: %s", h.Name, msg)
				case h.Field != "" && msg == "":
					t.Errorf("%s: allowed", h.Name)
				case h.Field != "" && !strings.Contains(msg, h.Field):
					t.Errorf("%s: message %q does not name %s", h.Name, msg, h.Field)
				}
			}
			plain := good.DeepCopy()
			plain.Labels = map[string]string{"app": "web"}
			mpsPods := slices.Contains(kinds(objs), "ValidatingAdmissionPolicy/tessera-mps-daemons")
			msg := p.admit(t, agent, node, "CREATE", plain, nil)
			if mpsPods {
				// The MPS policy's: it refuses the pod, this one does not see it.
				mp := compilePolicy(t, one[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "tessera-mps-daemons"))
				if msg != "" || !strings.Contains(mp.admit(t, agent, node, "CREATE", plain, nil), "only MPS daemon pods") {
					t.Errorf("a pod that is no daemon: IMEX policy %q, MPS policy admits it", msg)
				}
				if m := mp.admit(t, agent, node, "CREATE", good, nil); m != "" {
					t.Errorf("the MPS policy refuses the IMEX daemon pod: %s", m)
				}
				mpsPod, err := daemonpods.Of(e, ns, node, "/var/run/tessera/mps", false)
				if err == nil && p.admit(t, agent, node, "CREATE", mpsPod, nil) != "" {
					t.Error("the IMEX policy refuses an MPS daemon pod")
				}
			} else if !strings.Contains(msg, "tessera-imex-daemon") {
				t.Errorf("a pod that is no daemon, without MPS daemon pods: %q, want refused", msg)
			}
		})
	}
}
