package containerd

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// seen is what a probe container printed: its device nodes ("c 195:0" by
// path) and what opening each gave ("ok", "ENXIO", "EPERM"...), environment
// and mount points.
type seen struct {
	devices map[string]string
	opened  map[string]string
	env     map[string]string
	mounts  map[string]bool
	// mpsFiles is what the container sees under its MPS pipe directory,
	// relative to it; mps the lines of its client session.
	mpsFiles []string
	mps      []string
	// topo is the NCCL topology file the container read, as it read it.
	topo string
	// metadata is each device metadata file the container read, by its
	// path in the container, as it read it.
	metadata map[string]string
}

// probeLog waits until the container's probe has printed everything
// ("probe: ready") and parses it; the log comes through the API server
// from the node's kubelet, which reads the file containerd wrote.
func probeLog(t *testing.T, ns, pod, container string) seen {
	t.Helper()
	ctx := context.Background()
	var log string
	err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		b, err := client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		log = string(b)
		return strings.Contains(log, "probe: ready"), "no \"probe: ready\" in the log yet"
	})
	if err != nil {
		t.Fatalf("log of %s/%s container %s: %v", ns, pod, container, err)
	}
	return parseProbe(log)
}

// parseProbe parses a probe's log.
func parseProbe(log string) seen {
	s := seen{devices: map[string]string{}, opened: map[string]string{}, env: map[string]string{}, mounts: map[string]bool{}, metadata: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 5 && f[0] == "device":
			s.devices[f[1]] = f[2] + " " + f[3]
			s.opened[f[1]] = f[4]
		case len(f) >= 2 && f[0] == "env":
			k, v, _ := strings.Cut(strings.TrimPrefix(sc.Text(), "env "), "=")
			s.env[k] = v
		case len(f) >= 2 && f[0] == "mount":
			s.mounts[f[1]] = true
		case len(f) == 2 && f[0] == "mpsfile":
			s.mpsFiles = append(s.mpsFiles, f[1])
		case len(f) >= 1 && f[0] == "topo":
			s.topo += strings.TrimPrefix(strings.TrimPrefix(sc.Text(), "topo"), " ") + "\n"
		case len(f) >= 2 && f[0] == "metadata":
			// "metadata <path> <line>": the line keeps its own spacing.
			line := strings.TrimPrefix(strings.TrimPrefix(sc.Text(), "metadata "+f[1]), " ")
			s.metadata[f[1]] += line + "\n"
		case len(f) >= 2 && (f[0] == "mps" || f[0] == "mps:"):
			s.mps = append(s.mps, sc.Text())
		}
	}
	return s
}

// want is what CDI says a container of the claim gets: the CDI device IDs
// the agent recorded for it (those the kubelet passed to containerd),
// injected by the CDI library into an empty spec, and each device node's
// numbers read from its host node, which the simulator created.
type want struct {
	ids     []string
	devices map[string]string
	env     []string
	mounts  []string
	// sources are the mounts' host paths by container path.
	sources map[string]string
}

func claimWants(t *testing.T, node, claimUID string) want {
	t.Helper()
	w, err := cdi.NewWriter(cdi.Options{SpecDir: cluster.CDIDir(node)})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := w.ListClaimSpecs()
	if err != nil {
		t.Fatal(err)
	}
	var out want
	for _, rc := range claims {
		if rc.Claim.UID != claimUID {
			continue
		}
		for _, d := range rc.Devices {
			out.ids = append(out.ids, d.CDIDeviceIDs...)
		}
	}
	if len(out.ids) == 0 {
		t.Fatalf("node %s: no CDI spec records claim %s", node, claimUID)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cluster.CDIDir(node)), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, out.ids...); err != nil {
		t.Fatalf("inject %v: %v", out.ids, err)
	}
	out.env = spec.Process.Env
	out.sources = map[string]string{}
	for _, m := range spec.Mounts {
		out.mounts = append(out.mounts, m.Destination)
		out.sources[m.Destination] = m.Source
	}
	out.devices = map[string]string{}
	for _, id := range out.ids {
		dev := cache.GetDevice(id)
		if dev == nil {
			t.Fatalf("CDI device %s not found", id)
		}
		for _, dn := range dev.ContainerEdits.DeviceNodes {
			if dn.HostPath == "" && dn.Type == "c" && (dn.Major != 0 || dn.Minor != 0) {
				// A node the runtime makes in the container from the
				// spec's numbers, with none on the host (an IMEX channel).
				out.devices[dn.Path] = fmt.Sprintf("c %d:%d", dn.Major, dn.Minor)
				continue
			}
			host := dn.HostPath
			if host == "" {
				host = dn.Path
			}
			var st unix.Stat_t
			if err := unix.Stat(host, &st); err != nil {
				t.Fatalf("CDI device %s: host node %s: %v", id, host, err)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFCHR {
				t.Fatalf("CDI device %s: host node %s is not a character device (mode %o)", id, host, st.Mode)
			}
			out.devices[dn.Path] = fmt.Sprintf("c %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
	}
	return out
}

// checkContainer compares what a container printed with its claims' CDI
// specs: every device node with the simulator's numbers, every variable,
// every mount point.
func checkContainer(t *testing.T, ns string, pod *corev1.Pod, c corev1.Container) {
	t.Helper()
	got := probeLog(t, ns, pod.Name, c.Name)
	refs := map[string]string{} // claim reference (for messages) -> UID
	for _, ref := range c.Resources.Claims {
		refs[ref.Name] = claimUID(t, ns, pod, ref.Name)
	}
	// A pod asking an extended resource (nvidia.com/gpu: 2) gets a claim
	// the scheduler made for it, mapped to the containers that asked.
	if ext := pod.Status.ExtendedResourceClaimStatus; ext != nil {
		for _, m := range ext.RequestMappings {
			if m.ContainerName == c.Name {
				cl, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), ext.ResourceClaimName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				refs[m.ResourceName] = string(cl.UID)
			}
		}
	}
	if len(refs) == 0 {
		t.Errorf("pod %s container %s: no claim", pod.Name, c.Name)
	}
	for ref, uid := range refs {
		w := claimWants(t, pod.Spec.NodeName, uid)
		if len(w.devices) == 0 {
			t.Errorf("pod %s container %s (claim %s): CDI gives no device node", pod.Name, c.Name, ref)
		}
		for path, nums := range w.devices {
			if got.devices[path] != nums {
				t.Errorf("pod %s container %s (claim %s): device %s is %q in the container, the simulator's node is %q", pod.Name, c.Name, ref, path, got.devices[path], nums)
			}
			// The device cgroup must admit it: a simulated node has no
			// driver behind it (ENXIO); a refused one gives EPERM.
			if o := got.opened[path]; o != "ENXIO" && o != "ok" {
				t.Errorf("pod %s container %s (claim %s): opening %s gave %s: the container's device cgroup does not admit it", pod.Name, c.Name, ref, path, o)
			}
		}
		for _, kv := range w.env {
			k, v, _ := strings.Cut(kv, "=")
			if gv, ok := got.env[k]; !ok || gv != v {
				t.Errorf("pod %s container %s (claim %s): env %s=%q, CDI sets %q", pod.Name, c.Name, ref, k, gv, v)
			}
		}
		for _, m := range w.mounts {
			if !got.mounts[m] {
				t.Errorf("pod %s container %s (claim %s): no mount at %s, which CDI adds", pod.Name, c.Name, ref, m)
			}
		}
		t.Logf("pod %s container %s: %d device nodes, %d variables, %d mounts from %v", pod.Name, c.Name, len(w.devices), len(w.env), len(w.mounts), w.ids)
	}
}

// claimUID resolves a pod's claim reference to the claim's UID.
func claimUID(t *testing.T, ns string, pod *corev1.Pod, ref string) string {
	t.Helper()
	name := ""
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.Name == ref && pc.ResourceClaimName != nil {
			name = *pc.ResourceClaimName
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == ref && st.ResourceClaimName != nil {
			name = *st.ResourceClaimName
		}
	}
	if name == "" {
		t.Fatalf("pod %s: claim %s not resolved", pod.Name, ref)
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(c.UID)
}

func scenarioPath(name string) string { return filepath.Join(repo, "demo", name) }
