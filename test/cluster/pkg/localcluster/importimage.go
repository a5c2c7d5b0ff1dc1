package localcluster

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// importImage imports im into the node's containerd, in the kubelet's
// namespace (k8s.io), where the CRI looks for images; only im.Platform
// of an index when set.
func (c *Config) importImage(node string, im image) error {
	args := []string{"--address=" + c.ContainerdSocket(node), "--namespace=k8s.io", "images", "import"}
	if im.Platform != "" {
		args = append(args, "--platform="+im.Platform)
	}
	if out, err := exec.Command(c.bin("ctr"), append(args, im.Archive)...).CombinedOutput(); err != nil {
		return fmt.Errorf("import %s into containerd: %w\n%s", im.Ref, err, out)
	}
	return nil
}

// tarLayout writes the OCI image layout dir to archive as a tar of its
// directories and files, paths relative to dir.
func tarLayout(archive, dir string) (err error) {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return fmt.Errorf("%s: not a file or directory", path)
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	return tw.Close()
}
