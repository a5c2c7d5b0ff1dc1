// Package record is the file format in which the fake container runtime
// (test/cluster/cmd/fake-runtime) writes down what each container it creates
// would have been given by a real runtime: the CDI devices it was asked for
// and the device nodes, environment and mounts they resolve to. End-to-end
// tests and demos read these files instead of looking inside a container.
//
// There is one file per container, named by FileName, in the runtime's
// record directory. A restarted container overwrites its file; files are
// not removed when pods go away.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Container is what one CreateContainer would have produced.
type Container struct {
	PodNamespace  string `json:"podNamespace"`
	PodName       string `json:"podName"`
	PodUID        string `json:"podUID,omitempty"`
	ContainerName string `json:"containerName"`
	// Attempt counts restarts of the container, from 0.
	Attempt uint32 `json:"attempt"`
	// ContainerID is the ID the fake runtime gave the container.
	ContainerID string `json:"containerID"`
	// CDIDevices are the fully qualified CDI device names the container
	// asked for: those of the CRI CDIDevices field in order, then those of
	// cdi.k8s.io/* annotations in key order, without duplicates.
	CDIDevices []string `json:"cdiDevices"`
	// Devices are the device nodes of the container's OCI spec after CDI
	// injection.
	Devices []DeviceNode `json:"devices"`
	// Env is the process environment: the CRI request's variables, then
	// CDI's edits (which replace variables of the same name).
	Env []string `json:"env"`
	// Mounts are the CRI request's mounts as bind mounts, then CDI's.
	Mounts []Mount `json:"mounts"`
	// Hooks are the OCI hooks CDI added, by lifecycle stage.
	Hooks []Hook `json:"hooks,omitempty"`
	// AdditionalGIDs are the process's additional groups after CDI edits.
	AdditionalGIDs []uint32 `json:"additionalGIDs,omitempty"`
	// CreatedAt is when the runtime wrote the record.
	CreatedAt time.Time `json:"createdAt"`
}

// DeviceNode is one device node in the container.
type DeviceNode struct {
	Path  string `json:"path"`
	Type  string `json:"type"`
	Major int64  `json:"major"`
	Minor int64  `json:"minor"`
	// FileMode, UID and GID are set when the CDI spec set them.
	FileMode *uint32 `json:"fileMode,omitempty"`
	UID      *uint32 `json:"uid,omitempty"`
	GID      *uint32 `json:"gid,omitempty"`
}

// Mount is one mount in the container.
type Mount struct {
	Destination string   `json:"destination"`
	Source      string   `json:"source,omitempty"`
	Type        string   `json:"type,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// Hook is one OCI hook.
type Hook struct {
	// Stage is the OCI lifecycle stage: prestart, createRuntime,
	// createContainer, startContainer, poststart or poststop.
	Stage string   `json:"stage"`
	Path  string   `json:"path"`
	Args  []string `json:"args,omitempty"`
	Env   []string `json:"env,omitempty"`
}

// Getenv returns the value of the last variable named key in Env.
func (c *Container) Getenv(key string) (string, bool) {
	val, found := "", false
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		if k == key {
			val, found = v, true
		}
	}
	return val, found
}

// Device returns the device node at path in the container.
func (c *Container) Device(path string) (DeviceNode, bool) {
	for _, d := range c.Devices {
		if d.Path == path {
			return d, true
		}
	}
	return DeviceNode{}, false
}

// DevicePaths returns the container paths of Devices, in order.
func (c *Container) DevicePaths() []string {
	out := make([]string, len(c.Devices))
	for i, d := range c.Devices {
		out[i] = d.Path
	}
	return out
}

// FileName is the name of the record of a container, relative to the
// record directory: <podNamespace>_<podName>_<containerName>.json.
func FileName(podNamespace, podName, containerName string) string {
	return podNamespace + "_" + podName + "_" + containerName + ".json"
}

// Path is the record file of a container in dir.
func Path(dir, podNamespace, podName, containerName string) string {
	return filepath.Join(dir, FileName(podNamespace, podName, containerName))
}

func checkName(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
		return fmt.Errorf("%s %q cannot be part of a record file name", what, s)
	}
	return nil
}

// Write writes c into dir atomically (a temporary file renamed into place),
// so that a reader never sees a partial record.
func Write(dir string, c *Container) error {
	for _, n := range []struct{ what, s string }{
		{"pod namespace", c.PodNamespace}, {"pod name", c.PodName}, {"container name", c.ContainerName},
	} {
		if err := checkName(n.what, n.s); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	data = append(data, '\n')

	f, err := os.CreateTemp(dir, ".tmp-record-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, Path(dir, c.PodNamespace, c.PodName, c.ContainerName))
}

// ReadFile decodes one record file.
func ReadFile(path string) (*Container, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Container
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Read reads the record of a container from dir. The error wraps
// fs.ErrNotExist when the runtime has not created that container.
func Read(dir, podNamespace, podName, containerName string) (*Container, error) {
	return ReadFile(Path(dir, podNamespace, podName, containerName))
}

// ReadAll reads every record in dir, ordered by file name.
func ReadAll(dir string) ([]*Container, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*Container
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		c, err := ReadFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}
