// Command fake-runtime serves a fake CRI runtime and image service on a unix
// socket, for one real kubelet on a machine without containers. Containers
// never run, but the kubelet sees them created, running and stopped. Each
// CreateContainer resolves the container's CDI devices against the CDI spec
// directories as containerd would (an unresolvable name fails it) and writes
// what the container would have been given to
// --record-dir/<podNamespace>_<podName>_<containerName>.json
// (format: package github.com/tessera-gpu/tessera/test/cluster/pkg/record).
//
//	fake-runtime --socket=/run/node-1/cri.sock --cdi-spec-dir=/var/run/cdi --record-dir=/tmp/node-1/containers
//
// Point the kubelet at it with --container-runtime-endpoint=unix://<socket>.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/cri-client/pkg/util"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/fakeruntime"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var (
		socket    string
		specDirs  stringList
		recordDir string
		imageSize uint64
	)
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.StringVar(&socket, "socket", "", "unix socket to serve the CRI on (path or unix:// URL); required")
	fs.Var(&specDirs, "cdi-spec-dir", "CDI spec directory, repeatable, in increasing priority; required")
	fs.StringVar(&recordDir, "record-dir", "", "directory for the per-container record files; required")
	fs.Uint64Var(&imageSize, "image-size", fakeruntime.DefaultImageSize, "size in bytes reported for every image (the kubelet rejects 0)")
	klog.InitFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s --socket=PATH --cdi-spec-dir=DIR [--cdi-spec-dir=DIR...] --record-dir=DIR\n", os.Args[0])
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if socket == "" || len(specDirs) == 0 || recordDir == "" || fs.NArg() > 0 {
		fs.Usage()
		os.Exit(2)
	}
	if err := run(socket, specDirs, recordDir, imageSize); err != nil {
		klog.ErrorS(err, "fake-runtime failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(socket string, specDirs []string, recordDir string, imageSize uint64) error {
	logger := klog.Background().WithName("fake-runtime")
	rt, err := fakeruntime.New(fakeruntime.Options{
		SpecDirs:  specDirs,
		RecordDir: recordDir,
		ImageSize: imageSize,
		Logger:    logger,
	})
	if err != nil {
		return err
	}
	endpoint := socket
	if !strings.Contains(endpoint, "://") {
		endpoint = "unix://" + endpoint
	}
	// Removes a stale socket, creates the directory, and creates the
	// socket under a temporary name moved into place.
	l, err := util.CreateListener(endpoint)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", endpoint, err)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- rt.Serve(l) }()
	logger.Info("Serving CRI", "endpoint", endpoint, "cdiSpecDirs", specDirs, "recordDir", recordDir)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		logger.Info("Stopping")
		rt.Stop()
		if path, ok := strings.CutPrefix(endpoint, "unix://"); ok {
			_ = os.Remove(path)
		}
		return nil
	}
}
