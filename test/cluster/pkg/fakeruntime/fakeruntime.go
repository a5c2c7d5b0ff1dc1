// Package fakeruntime is a CRI runtime for real kubelets on machines without
// containers: the fake runtime and image service of k8s.io/cri-client/pkg/fake,
// with CreateContainer extended to do what a real runtime does with CDI
// devices. Every CreateContainer resolves the container's CDI device names
// against the CDI spec directories with the CDI library, injecting them into
// an OCI spec the way containerd does, fails like containerd when a name does
// not resolve, and writes what the container would have been given to a
// record file (package record).
//
// Containers stay running from StartContainer until StopContainer, so pods
// reach Running and stay there.
package fakeruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/record"
)

// DefaultImageSize is the size reported for every image. The kubelet
// rejects images of size 0.
const DefaultImageSize = 16 << 20

// Options configure a Runtime.
type Options struct {
	// SpecDirs are the CDI spec directories, in increasing priority, as
	// for cdi.WithSpecDirs. At least one is required.
	SpecDirs []string
	// RecordDir receives one record file per container. Required.
	RecordDir string
	// ImageSize is the size of every image; 0 means DefaultImageSize.
	ImageSize uint64
	// Logger logs each CreateContainer; the zero value discards.
	Logger klog.Logger
}

// Runtime serves the CRI runtime and image services. Methods other than
// CreateContainer are those of the embedded fake.RemoteRuntime.
type Runtime struct {
	*fake.RemoteRuntime

	cdi       *cdi.Cache
	recordDir string
	logger    klog.Logger
	server    *grpc.Server
	stop      chan struct{}
}

// New creates a Runtime; Serve starts serving it.
func New(opts Options) (*Runtime, error) {
	if len(opts.SpecDirs) == 0 {
		return nil, errors.New("no CDI spec directory")
	}
	if opts.RecordDir == "" {
		return nil, errors.New("no record directory")
	}
	if err := os.MkdirAll(opts.RecordDir, 0o755); err != nil {
		return nil, err
	}
	size := opts.ImageSize
	if size == 0 {
		size = DefaultImageSize
	}
	// No auto-refresh: Refresh() before every injection rescans the spec
	// directories, so a spec written just before CreateContainer is found
	// (containerd's registry watches the directories to the same effect).
	cache, err := cdi.NewCache(cdi.WithSpecDirs(opts.SpecDirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, err
	}

	r := &Runtime{
		RemoteRuntime: fake.NewFakeRemoteRuntime(),
		cdi:           cache,
		recordDir:     opts.RecordDir,
		logger:        opts.Logger,
		server:        grpc.NewServer(),
		stop:          make(chan struct{}),
	}
	r.ImageService.SetFakeImageSize(size)
	// The kubelet reads image and container filesystem usage from the CRI
	// when image and container garbage collection are split.
	usage := []*kubeapi.FilesystemUsage{{
		Timestamp:  time.Now().UnixNano(),
		FsId:       &kubeapi.FilesystemIdentifier{Mountpoint: opts.RecordDir},
		UsedBytes:  &kubeapi.UInt64Value{Value: size},
		InodesUsed: &kubeapi.UInt64Value{Value: 1},
	}}
	r.ImageService.SetFakeFilesystemUsage(usage)
	r.ImageService.SetFakeContainerFilesystemUsage(usage)
	r.RuntimeService.Lock()
	r.RuntimeService.FakeStatus = &kubeapi.RuntimeStatus{
		Conditions: []*kubeapi.RuntimeCondition{
			{Type: kubeapi.RuntimeReady, Status: true},
			{Type: kubeapi.NetworkReady, Status: true},
		},
	}
	r.RuntimeService.Unlock()

	// Register this type, not the embedded RemoteRuntime, so that the
	// CreateContainer below is the one served.
	kubeapi.RegisterRuntimeServiceServer(r.server, r)
	kubeapi.RegisterImageServiceServer(r.server, r)
	return r, nil
}

// Serve serves the CRI on l until Stop.
func (r *Runtime) Serve(l net.Listener) error {
	go r.trimCallLogs()
	return r.server.Serve(l)
}

// Stop stops serving, closing open connections.
func (r *Runtime) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.server.Stop()
}

// trimCallLogs empties the fakes' call logs now and then: they record every
// call, and a kubelet polls several times a second.
func (r *Runtime) trimCallLogs() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.RuntimeService.Lock()
		r.RuntimeService.Called = nil
		r.RuntimeService.Unlock()
		r.ImageService.Lock()
		r.ImageService.Called = nil
		r.ImageService.Unlock()
	}
}

// CreateContainer resolves the container's CDI devices, creates the fake
// container and records what it was given.
func (r *Runtime) CreateContainer(ctx context.Context, req *kubeapi.CreateContainerRequest) (*kubeapi.CreateContainerResponse, error) {
	config := req.GetConfig()
	ns, pod, uid := podOf(req)
	name := config.GetMetadata().GetName()
	logger := r.logger.WithValues("pod", ns+"/"+pod, "container", name, "attempt", config.GetMetadata().GetAttempt())

	names, spec, err := r.Resolve(config)
	if err != nil {
		logger.Error(err, "CreateContainer failed", "cdiDevices", names)
		return nil, err
	}

	resp, err := r.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		logger.Error(err, "CreateContainer failed", "cdiDevices", names)
		return nil, err
	}

	if err := r.setLogPath(resp.GetContainerId(), req); err != nil {
		_ = r.RuntimeService.RemoveContainer(ctx, resp.GetContainerId())
		logger.Error(err, "CreateContainer failed")
		return nil, status.Errorf(codes.Internal, "container log: %v", err)
	}

	rec := newRecord(spec)
	rec.PodNamespace, rec.PodName, rec.PodUID = ns, pod, uid
	rec.ContainerName, rec.Attempt = name, config.GetMetadata().GetAttempt()
	rec.ContainerID = resp.GetContainerId()
	rec.CDIDevices = names
	if err := record.Write(r.recordDir, rec); err != nil {
		_ = r.RuntimeService.RemoveContainer(ctx, resp.GetContainerId())
		err = status.Errorf(codes.Internal, "record container: %v", err)
		logger.Error(err, "CreateContainer failed", "cdiDevices", names)
		return nil, err
	}
	logger.Info("CreateContainer", "containerID", rec.ContainerID, "cdiDevices", names, "deviceNodes", rec.DevicePaths())
	return resp, nil
}

// setLogPath gives the container the log file a real runtime would write,
// <sandbox log directory>/<container log path>, and creates it. The base
// fake leaves the path empty, and the kubelet cleans a removed container's
// logs by globbing "<log path>*": with an empty path that is every file in
// the kubelet's working directory.
func (r *Runtime) setLogPath(id string, req *kubeapi.CreateContainerRequest) error {
	path := filepath.Join(req.GetSandboxConfig().GetLogDirectory(), req.GetConfig().GetLogPath())
	if !filepath.IsAbs(path) || req.GetConfig().GetLogPath() == "" {
		path = filepath.Join(r.recordDir, "logs", id+".log")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	r.RuntimeService.Lock()
	defer r.RuntimeService.Unlock()
	c, ok := r.RuntimeService.Containers[id]
	if !ok {
		return fmt.Errorf("container %s vanished", id)
	}
	c.LogPath = path
	return nil
}

// Resolve returns the CDI device names a container asks for and the OCI
// spec it would run with: the request's environment, mounts and user,
// with the CDI devices injected as containerd injects them. The error is
// that of containerd when a name is malformed or does not resolve, or a
// device cannot be injected.
func (r *Runtime) Resolve(config *kubeapi.ContainerConfig) ([]string, *oci.Spec, error) {
	names, err := CDIDeviceNames(config)
	if err != nil {
		return names, nil, status.Errorf(codes.InvalidArgument, "failed to parse CDI device annotations: %v", err)
	}
	spec := baseSpec(config)
	if len(names) == 0 {
		return names, spec, nil
	}
	if err := r.cdi.Refresh(); err != nil {
		// Like containerd: a broken spec file of some vendor does not stop
		// the injection of devices from other specs.
		r.logger.Info("CDI registry refresh failed", "err", err)
	}
	if _, err := r.cdi.InjectDevices(spec, names...); err != nil {
		return names, nil, status.Errorf(codes.Unknown, "CDI device injection failed: %v", err)
	}
	return names, spec, nil
}

// CDIDeviceNames returns the CDI devices a container asks for, as
// containerd collects them: the CRI CDIDevices field in order, then the
// values of cdi.k8s.io/* annotations, dropping repeats. Annotations are
// taken in key order (containerd takes them in map order).
func CDIDeviceNames(config *kubeapi.ContainerConfig) ([]string, error) {
	names := []string{}
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, d := range config.GetCDIDevices() {
		add(d.GetName())
	}
	ann := config.GetAnnotations()
	keys := make([]string, 0, len(ann))
	for k := range ann {
		if strings.HasPrefix(k, cdi.AnnotationPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, n := range strings.Split(ann[k], ",") {
			if !parser.IsQualifiedName(n) {
				return names, fmt.Errorf("invalid CDI device name %q", n)
			}
			add(n)
		}
	}
	return names, nil
}

// podOf returns the namespace, name and UID of the container's pod, from
// the sandbox config or else the labels the kubelet puts on containers.
func podOf(req *kubeapi.CreateContainerRequest) (namespace, name, uid string) {
	md := req.GetSandboxConfig().GetMetadata()
	namespace, name, uid = md.GetNamespace(), md.GetName(), md.GetUid()
	labels := req.GetConfig().GetLabels()
	if namespace == "" {
		namespace = labels["io.kubernetes.pod.namespace"]
	}
	if name == "" {
		name = labels["io.kubernetes.pod.name"]
	}
	if uid == "" {
		uid = labels["io.kubernetes.pod.uid"]
	}
	return namespace, name, uid
}

// baseSpec is the part of the OCI spec a container gets from its CRI
// request that CDI edits can touch: environment, bind mounts and user.
// Everything a runtime adds by default (/proc, /dev, cgroups, ...) is
// left out. CRI devices (from device plugins) are left out too: there are
// none on these clusters.
func baseSpec(config *kubeapi.ContainerConfig) *oci.Spec {
	spec := &oci.Spec{
		Version: oci.Version,
		Process: &oci.Process{Env: []string{}},
		Linux:   &oci.Linux{},
	}
	for _, kv := range config.GetEnvs() {
		spec.Process.Env = append(spec.Process.Env, kv.GetKey()+"="+string(kv.GetValue()))
	}
	sc := config.GetLinux().GetSecurityContext()
	if u := sc.GetRunAsUser(); u != nil {
		spec.Process.User.UID = uint32(u.GetValue())
	}
	if g := sc.GetRunAsGroup(); g != nil {
		spec.Process.User.GID = uint32(g.GetValue())
	}
	for _, g := range sc.GetSupplementalGroups() {
		spec.Process.User.AdditionalGids = append(spec.Process.User.AdditionalGids, uint32(g))
	}
	for _, m := range config.GetMounts() {
		// As containerd's WithMounts turns CRI mounts into OCI bind mounts.
		opts := []string{"rbind"}
		switch m.GetPropagation() {
		case kubeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
			opts = append(opts, "rshared")
		case kubeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
			opts = append(opts, "rslave")
		default:
			opts = append(opts, "rprivate")
		}
		if m.GetReadonly() {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		spec.Mounts = append(spec.Mounts, oci.Mount{
			Destination: m.GetContainerPath(),
			Source:      m.GetHostPath(),
			Type:        "bind",
			Options:     opts,
		})
	}
	return spec
}

// newRecord copies out of spec what a record holds.
func newRecord(spec *oci.Spec) *record.Container {
	rec := &record.Container{
		Devices:   []record.DeviceNode{},
		Env:       []string{},
		Mounts:    []record.Mount{},
		CreatedAt: time.Now().UTC(),
	}
	if spec.Process != nil {
		rec.Env = append(rec.Env, spec.Process.Env...)
		rec.AdditionalGIDs = append(rec.AdditionalGIDs, spec.Process.User.AdditionalGids...)
	}
	if spec.Linux != nil {
		for _, d := range spec.Linux.Devices {
			n := record.DeviceNode{Path: d.Path, Type: d.Type, Major: d.Major, Minor: d.Minor, UID: d.UID, GID: d.GID}
			if d.FileMode != nil {
				m := uint32(*d.FileMode)
				n.FileMode = &m
			}
			rec.Devices = append(rec.Devices, n)
		}
	}
	for _, m := range spec.Mounts {
		rec.Mounts = append(rec.Mounts, record.Mount{Destination: m.Destination, Source: m.Source, Type: m.Type, Options: m.Options})
	}
	if h := spec.Hooks; h != nil {
		for _, s := range []struct {
			stage string
			hooks []oci.Hook
		}{
			{cdi.PrestartHook, h.Prestart}, //nolint:staticcheck // CDI still writes prestart hooks
			{cdi.CreateRuntimeHook, h.CreateRuntime},
			{cdi.CreateContainerHook, h.CreateContainer},
			{cdi.StartContainerHook, h.StartContainer},
			{cdi.PoststartHook, h.Poststart},
			{cdi.PoststopHook, h.Poststop},
		} {
			for _, hk := range s.hooks {
				rec.Hooks = append(rec.Hooks, record.Hook{Stage: s.stage, Path: hk.Path, Args: hk.Args, Env: hk.Env})
			}
		}
	}
	return rec
}
