package record

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	c := &Container{
		PodNamespace: "default", PodName: "p", ContainerName: "c",
		CDIDevices: []string{"k8s.gpu.tessera.dev/claim=x"},
		Devices:    []DeviceNode{{Path: "/dev/nvidia0", Type: "c", Major: 195}},
		Env:        []string{"A=1", "B=2", "A=3"},
		Mounts:     []Mount{{Destination: "/x", Source: "/y", Type: "bind", Options: []string{"ro"}}},
		CreatedAt:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	if err := Write(dir, c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "default_p_c.json")); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir, "default", "p", "c")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("read %+v, wrote %+v", got, c)
	}
	if v, ok := got.Getenv("A"); !ok || v != "3" {
		t.Errorf("Getenv(A) = %q, %v; want the last value", v, ok)
	}
	if _, ok := got.Getenv("C"); ok {
		t.Error("Getenv(C) found")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if _, err := Read(dir, "default", "p", "other"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing record: %v", err)
	}
}

func TestWriteRejectsPathNames(t *testing.T) {
	for _, c := range []*Container{
		{PodNamespace: "a/b", PodName: "p", ContainerName: "c"},
		{PodNamespace: "a", PodName: "..", ContainerName: "c"},
		{PodNamespace: "a", PodName: "p", ContainerName: ""},
	} {
		if err := Write(t.TempDir(), c); err == nil {
			t.Errorf("Write(%q, %q, %q) succeeded", c.PodNamespace, c.PodName, c.ContainerName)
		}
	}
}
