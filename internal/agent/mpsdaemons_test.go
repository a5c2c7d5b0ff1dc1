package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/mps/daemonpod"
)

func TestMPSDaemonsFlags(t *testing.T) {
	pod := func(namespace, image, sa string) Config {
		return Config{NodeName: "n", MPSDaemons: "pod", MPSDaemonNamespace: namespace, MPSDaemonImage: image, MPSDaemonServiceAccount: sa}
	}
	for _, tc := range []struct {
		name         string
		cfg          Config
		podNamespace string // POD_NAMESPACE
		wantErr      string
		wantNS       string
	}{
		{name: "default is process", cfg: Config{NodeName: "n"}},
		{name: "process", cfg: Config{NodeName: "n", MPSDaemons: "process"}},
		{name: "unknown", cfg: Config{NodeName: "n", MPSDaemons: "container"}, wantErr: `--mps-daemons="container"`},
		{name: "pod, all set", cfg: pod("ns", "img", "sa"), wantNS: "ns"},
		{name: "pod, namespace from POD_NAMESPACE", cfg: pod("", "img", "sa"), podNamespace: "tessera-system", wantNS: "tessera-system"},
		{name: "pod, flag over POD_NAMESPACE", cfg: pod("ns", "img", "sa"), podNamespace: "tessera-system", wantNS: "ns"},
		{name: "pod, no namespace", cfg: pod("", "img", "sa"), wantErr: "--mps-daemon-namespace"},
		{name: "pod, no image", cfg: pod("ns", "", "sa"), wantErr: "--mps-daemon-image"},
		{name: "pod, no service account", cfg: pod("ns", "img", ""), wantErr: "--mps-daemon-service-account"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.podNamespace)
			c := tc.cfg
			err := c.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate: %v, want an error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.MPSDaemonNamespace != tc.wantNS {
				t.Errorf("namespace %q, want %q", c.MPSDaemonNamespace, tc.wantNS)
			}
			l, err := c.mpsLauncher(fake.NewClientset(), klog.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, isPod := l.(*daemonpod.Launcher); isPod != (c.MPSDaemons == "pod") || (c.MPSDaemons != "pod" && l != nil) {
				t.Errorf("--mps-daemons=%q: launcher %T", c.MPSDaemons, l)
			}
		})
	}
}

// TestMPSDaemonFlagsReachThePod: the flags, set as the chart sets them
// (TESSERA_<FLAG>), describe the pod the launcher creates.
func TestMPSDaemonFlagsReachThePod(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.AddFlags(fs)
	env := map[string]string{
		"TESSERA_NODE_NAME":                  "gpu-1",
		"TESSERA_MPS_DAEMONS":                "pod",
		"TESSERA_MPS_DAEMON_IMAGE":           "ghcr.io/tessera-gpu/tessera-kubelet-plugin:0.1.0",
		"TESSERA_MPS_DAEMON_SERVICE_ACCOUNT": "tessera-mps-daemon",
		"TESSERA_MPS_DAEMON_PRIVILEGED":      "true",
		"TESSERA_MPS_DAEMON_PRIORITY_CLASS":  "system-node-critical",
	}
	if err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", "tessera-system")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "u"}})
	l, err := c.mpsLauncher(client, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.Launch(context.Background(), mps.Launch{ID: "d1", Argv: []string{"nvidia-cuda-mps-control", "-f"}, Dir: "/var/run/tessera/mps/d1"})
	if err != nil {
		t.Fatal(err)
	}
	ns, name, _ := strings.Cut(h.Pod, "/")
	p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Spec
	if ns != "tessera-system" || s.NodeName != "gpu-1" || s.ServiceAccountName != "tessera-mps-daemon" || s.PriorityClassName != "system-node-critical" ||
		s.Containers[0].Image != env["TESSERA_MPS_DAEMON_IMAGE"] || s.Containers[0].SecurityContext.Privileged == nil || !*s.Containers[0].SecurityContext.Privileged {
		t.Errorf("pod %s/%s: %+v", ns, name, s)
	}
}
