package fakeruntime

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/record"
)

// gpuSpec has two devices with explicit numbers (their host nodes do not
// exist, as with the simulator), spec-wide edits, and one device whose host
// node neither exists nor has numbers.
const gpuSpec = `{
  "cdiVersion": "0.6.0",
  "kind": "example.com/gpu",
  "containerEdits": {
    "env": ["EXAMPLE_COMMON=1"],
    "deviceNodes": [{"path": "/dev/examplectl", "hostPath": "/nonexistent/examplectl", "type": "c", "major": 195, "minor": 255}],
    "hooks": [{"hookName": "createContainer", "path": "/usr/bin/example-hook", "args": ["example-hook", "ldcache"]}]
  },
  "devices": [
    {
      "name": "gpu0",
      "containerEdits": {
        "env": ["EXAMPLE_VISIBLE_DEVICES=gpu0"],
        "deviceNodes": [{"path": "/dev/example0", "hostPath": "/nonexistent/example0", "type": "c", "major": 195, "minor": 0}],
        "mounts": [{"hostPath": "/nonexistent/lib", "containerPath": "/usr/lib/example", "options": ["ro", "nosuid", "bind"]}]
      }
    },
    {
      "name": "gpu1",
      "containerEdits": {
        "deviceNodes": [{"path": "/dev/example1", "hostPath": "/nonexistent/example1", "type": "c", "major": 195, "minor": 1}]
      }
    },
    {
      "name": "broken",
      "containerEdits": {
        "deviceNodes": [{"path": "/dev/example9", "hostPath": "/nonexistent/example9"}]
      }
    }
  ]
}
`

type env struct {
	rt        *Runtime
	client    kubeapi.RuntimeServiceClient
	specDir   string
	recordDir string
}

func start(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{specDir: filepath.Join(dir, "cdi"), recordDir: filepath.Join(dir, "records")}
	if err := os.Mkdir(e.specDir, 0o755); err != nil {
		t.Fatal(err)
	}
	rt, err := New(Options{SpecDirs: []string{e.specDir}, RecordDir: e.recordDir})
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	sock := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rt.Serve(l) }()
	t.Cleanup(rt.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.client = kubeapi.NewRuntimeServiceClient(conn)
	return e
}

func (e *env) writeSpec(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.specDir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// sandbox runs a pod sandbox as the kubelet does and returns its ID and config.
func (e *env) sandbox(t *testing.T, ns, name string) (string, *kubeapi.PodSandboxConfig) {
	t.Helper()
	cfg := &kubeapi.PodSandboxConfig{
		Metadata: &kubeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: "uid-" + name},
	}
	resp, err := e.client.RunPodSandbox(ctx(t), &kubeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return resp.PodSandboxId, cfg
}

func containerConfig(name string, cdiNames []string, ann map[string]string) *kubeapi.ContainerConfig {
	c := &kubeapi.ContainerConfig{
		Metadata:    &kubeapi.ContainerMetadata{Name: name},
		Image:       &kubeapi.ImageSpec{Image: "registry.k8s.io/pause:3.10"},
		Annotations: ann,
		Envs:        []*kubeapi.KeyValue{{Key: "FROM_POD", Value: []byte("yes")}, {Key: "EXAMPLE_VISIBLE_DEVICES", Value: []byte("pod")}},
		Mounts: []*kubeapi.Mount{{
			ContainerPath: "/var/run/secrets/kubernetes.io/serviceaccount", HostPath: "/tmp/token", Readonly: true,
		}},
	}
	for _, n := range cdiNames {
		c.CDIDevices = append(c.CDIDevices, &kubeapi.CDIDevice{Name: n})
	}
	return c
}

func TestCreateContainerInjectsAndRecords(t *testing.T) {
	e := start(t)
	e.writeSpec(t, "example.json", gpuSpec)
	id, sbCfg := e.sandbox(t, "ns1", "pod1")

	cfg := containerConfig("ctr", []string{"example.com/gpu=gpu0"}, map[string]string{
		// Annotations add devices after the CRI field, and repeats are dropped.
		"cdi.k8s.io/b": "example.com/gpu=gpu1,example.com/gpu=gpu0",
		"other/key":    "ignored",
	})
	resp, err := e.client.CreateContainer(ctx(t), &kubeapi.CreateContainerRequest{PodSandboxId: id, Config: cfg, SandboxConfig: sbCfg})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}

	rec, err := record.Read(e.recordDir, "ns1", "pod1", "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if rec.PodNamespace != "ns1" || rec.PodName != "pod1" || rec.PodUID != "uid-pod1" || rec.ContainerName != "ctr" || rec.ContainerID != resp.ContainerId {
		t.Errorf("identity: %+v", rec)
	}
	if want := []string{"example.com/gpu=gpu0", "example.com/gpu=gpu1"}; !reflect.DeepEqual(rec.CDIDevices, want) {
		t.Errorf("cdiDevices = %v, want %v", rec.CDIDevices, want)
	}
	wantDevs := map[string][3]int64{"/dev/examplectl": {195, 255}, "/dev/example0": {195, 0}, "/dev/example1": {195, 1}}
	if len(rec.Devices) != len(wantDevs) {
		t.Errorf("devices = %+v, want %v", rec.Devices, wantDevs)
	}
	for path, mm := range wantDevs {
		d, ok := rec.Device(path)
		if !ok || d.Type != "c" || d.Major != mm[0] || d.Minor != mm[1] {
			t.Errorf("device %s = %+v (found %v), want c %d:%d", path, d, ok, mm[0], mm[1])
		}
	}
	for k, want := range map[string]string{
		"FROM_POD":                "yes",
		"EXAMPLE_COMMON":          "1",
		"EXAMPLE_VISIBLE_DEVICES": "gpu0", // CDI replaces the pod's value
	} {
		if got, ok := rec.Getenv(k); !ok || got != want {
			t.Errorf("env %s = %q (set %v), want %q; env %v", k, got, ok, want, rec.Env)
		}
	}
	var dests []string
	for _, m := range rec.Mounts {
		dests = append(dests, m.Destination)
		if m.Destination == "/var/run/secrets/kubernetes.io/serviceaccount" && !reflect.DeepEqual(m.Options, []string{"rbind", "rprivate", "ro"}) {
			t.Errorf("CRI mount options = %v", m.Options)
		}
		if m.Destination == "/usr/lib/example" && (m.Source != "/nonexistent/lib" || !reflect.DeepEqual(m.Options, []string{"ro", "nosuid", "bind"})) {
			t.Errorf("CDI mount = %+v", m)
		}
	}
	if len(dests) != 2 {
		t.Errorf("mounts = %v, want the CRI and the CDI mount", dests)
	}
	if len(rec.Hooks) != 1 || rec.Hooks[0].Stage != "createContainer" || rec.Hooks[0].Path != "/usr/bin/example-hook" {
		t.Errorf("hooks = %+v", rec.Hooks)
	}

	// The container runs from StartContainer on, so the pod goes Running.
	if _, err := e.client.StartContainer(ctx(t), &kubeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
		t.Fatal(err)
	}
	st, err := e.client.ContainerStatus(ctx(t), &kubeapi.ContainerStatusRequest{ContainerId: resp.ContainerId})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.State != kubeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("state after start = %v", st.Status.State)
	}
}

func TestCreateContainerFailures(t *testing.T) {
	e := start(t)
	e.writeSpec(t, "example.json", gpuSpec)
	id, sbCfg := e.sandbox(t, "ns1", "pod1")

	for _, tc := range []struct {
		name    string
		cdi     []string
		ann     map[string]string
		code    codes.Code
		wantErr string
	}{
		{name: "unknown device", cdi: []string{"example.com/gpu=gpu0", "example.com/gpu=gpu7"}, code: codes.Unknown,
			wantErr: "unresolvable CDI devices example.com/gpu=gpu7"},
		{name: "unknown kind", cdi: []string{"other.com/gpu=gpu0"}, code: codes.Unknown,
			wantErr: "unresolvable CDI devices other.com/gpu=gpu0"},
		{name: "unknown device in annotation", ann: map[string]string{"cdi.k8s.io/x": "example.com/gpu=nope"}, code: codes.Unknown,
			wantErr: "unresolvable CDI devices example.com/gpu=nope"},
		{name: "malformed annotation", ann: map[string]string{"cdi.k8s.io/x": "gpu0"}, code: codes.InvalidArgument,
			wantErr: `invalid CDI device name "gpu0"`},
		{name: "host node missing and no numbers", cdi: []string{"example.com/gpu=broken"}, code: codes.Unknown,
			wantErr: `failed to stat CDI host device "/nonexistent/example9"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctrName := strings.ReplaceAll(tc.name, " ", "-")
			cfg := containerConfig(ctrName, tc.cdi, tc.ann)
			_, err := e.client.CreateContainer(ctx(t), &kubeapi.CreateContainerRequest{PodSandboxId: id, Config: cfg, SandboxConfig: sbCfg})
			if err == nil {
				t.Fatal("CreateContainer succeeded")
			}
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v (code %v), want code %v containing %q", err, status.Code(err), tc.code, tc.wantErr)
			}
			if _, err := record.Read(e.recordDir, "ns1", "pod1", ctrName); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("record of a failed container: %v", err)
			}
		})
	}
	list, err := e.client.ListContainers(ctx(t), &kubeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Containers) != 0 {
		t.Errorf("failed creates left containers: %v", list.Containers)
	}
}

// A spec written after the runtime started (as the driver writes one per
// claim just before the kubelet creates the container) is found.
func TestSpecWrittenLaterIsFound(t *testing.T) {
	e := start(t)
	id, sbCfg := e.sandbox(t, "ns1", "pod1")
	req := &kubeapi.CreateContainerRequest{PodSandboxId: id, SandboxConfig: sbCfg,
		Config: containerConfig("ctr", []string{"example.com/gpu=gpu1"}, nil)}
	if _, err := e.client.CreateContainer(ctx(t), req); err == nil {
		t.Fatal("CreateContainer succeeded without a spec")
	}
	e.writeSpec(t, "example.json", gpuSpec)
	if _, err := e.client.CreateContainer(ctx(t), req); err != nil {
		t.Fatalf("CreateContainer after writing the spec: %v", err)
	}
	rec, err := record.Read(e.recordDir, "ns1", "pod1", "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec.DevicePaths(), []string{"/dev/examplectl", "/dev/example1"}) {
		t.Errorf("devices = %v", rec.DevicePaths())
	}
}

// A container without CDI devices is recorded too, with no devices, and a
// broken spec file of another vendor does not get in the way.
func TestContainerWithoutDevices(t *testing.T) {
	e := start(t)
	e.writeSpec(t, "broken.json", `{"cdiVersion": "0.6.0", "kind": "broken.com/x", "devices": [`)
	e.writeSpec(t, "example.json", gpuSpec)
	id, sbCfg := e.sandbox(t, "ns2", "plain")
	for _, c := range []struct {
		name string
		cdi  []string
	}{{"plain", nil}, {"gpu", []string{"example.com/gpu=gpu0"}}} {
		req := &kubeapi.CreateContainerRequest{PodSandboxId: id, SandboxConfig: sbCfg, Config: containerConfig(c.name, c.cdi, nil)}
		if _, err := e.client.CreateContainer(ctx(t), req); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	all, err := record.ReadAll(e.recordDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ContainerName != "gpu" || all[1].ContainerName != "plain" {
		t.Fatalf("records = %+v", all)
	}
	plain := all[1]
	if len(plain.CDIDevices) != 0 || len(plain.Devices) != 0 || len(plain.Mounts) != 1 {
		t.Errorf("plain container = %+v", plain)
	}
	if _, ok := plain.Getenv("EXAMPLE_COMMON"); ok {
		t.Errorf("plain container got CDI env: %v", plain.Env)
	}
}

// The pod's identity comes from the kubelet's labels when the request has
// no sandbox config.
func TestPodFromLabels(t *testing.T) {
	e := start(t)
	id, _ := e.sandbox(t, "ns3", "pod3")
	cfg := containerConfig("ctr", nil, nil)
	cfg.Labels = map[string]string{"io.kubernetes.pod.namespace": "ns3", "io.kubernetes.pod.name": "pod3", "io.kubernetes.pod.uid": "u3"}
	if _, err := e.client.CreateContainer(ctx(t), &kubeapi.CreateContainerRequest{PodSandboxId: id, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	rec, err := record.Read(e.recordDir, "ns3", "pod3", "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if rec.PodUID != "u3" {
		t.Errorf("pod UID = %q", rec.PodUID)
	}
}

func TestImageSize(t *testing.T) {
	e := start(t)
	img := &kubeapi.ImageSpec{Image: "registry.k8s.io/pause:3.10"}
	if _, err := e.rt.PullImage(ctx(t), &kubeapi.PullImageRequest{Image: img}); err != nil {
		t.Fatal(err)
	}
	st, err := e.rt.ImageStatus(ctx(t), &kubeapi.ImageStatusRequest{Image: img})
	if err != nil {
		t.Fatal(err)
	}
	if st.Image.GetSize() != DefaultImageSize {
		t.Errorf("image size = %d, want %d", st.Image.GetSize(), DefaultImageSize)
	}
}
