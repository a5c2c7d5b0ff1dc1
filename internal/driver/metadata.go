package driver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/claims"
	"github.com/tessera-gpu/tessera/internal/names"
)

// Device metadata (KEP-5304) is written by the kubelet plugin helper
// (--device-metadata): after each prepare, a file per request under
// <plugin-data-dir>/dra-device-metadata/<namespace>_<claim>/ and a CDI spec
// <cdi-dir>/gpu.tessera.dev_metadata_<uid>_<request>.json that mounts it;
// after each unprepare it removes both. What a prepare answers is the
// claims package's (claims.Device.Metadata).
//
// The helper cleans up only after an unprepare it served. An agent killed
// between an unprepare and that, a claim released as stale (never
// unprepared by the kubelet), or --device-metadata turned off leaves files
// no claim owns: sweepMetadata removes them at start, before the kubelet
// can call.

// metadataDir is the helper's directory of metadata files.
const metadataDir = "dra-device-metadata"

// sweepMetadata removes the metadata files and specs of claims the
// checkpoint does not record. Failures are logged: a file left is only
// disk space, never a container's view.
func (d *Driver) sweepMetadata(ctx context.Context) {
	logger := klog.FromContext(ctx)
	recorded := d.claims.Recorded()
	keep := map[string]bool{}
	for _, ref := range recorded {
		keep[ref.Namespace+"_"+ref.Name] = true
	}
	prefix := names.DriverName + "_metadata_"
	specs, err := filepath.Glob(filepath.Join(d.opts.CDIDir, prefix+"*.json"))
	if err != nil {
		logger.Error(err, "List device metadata CDI specs")
	}
	for _, p := range specs {
		rest := strings.TrimPrefix(filepath.Base(p), prefix)
		uid, _, ok := strings.Cut(rest, "_") // a UID has no '_'
		if !ok {
			continue
		}
		if _, held := recorded[uid]; held {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Error(err, "Remove device metadata CDI spec of a claim that is not prepared", "path", p)
			continue
		}
		logger.Info("Removed device metadata CDI spec of a claim that is not prepared", "uid", uid)
	}
	dir := filepath.Join(d.opts.PluginDataDir, metadataDir)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		logger.Error(err, "List device metadata files")
	}
	for _, e := range entries {
		if !e.IsDir() || keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			logger.Error(err, "Remove device metadata of a claim that is not prepared", "claim", e.Name())
			continue
		}
		logger.Info("Removed device metadata of a claim that is not prepared", "claim", e.Name())
	}
}

// removeMetadata removes the metadata spec and files of one claim the
// manager released as stale: the kubelet never unprepares it, so the
// helper never cleans up after it. Called before the prepare that
// released it returns, so before the helper writes the files of a claim
// that replaced it under the same name.
func (d *Driver) removeMetadata(logger klog.Logger, uid string, c claims.ClaimRef) {
	specs, err := filepath.Glob(filepath.Join(d.opts.CDIDir, names.DriverName+"_metadata_"+uid+"_*.json"))
	if err != nil {
		logger.Error(err, "List device metadata CDI specs of a released claim", "uid", uid)
	}
	for _, p := range specs {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Error(err, "Remove device metadata CDI spec of a released claim", "path", p)
		}
	}
	dir := filepath.Join(d.opts.PluginDataDir, metadataDir, c.Namespace+"_"+c.Name)
	if err := os.RemoveAll(dir); err != nil {
		logger.Error(err, "Remove device metadata of a released claim", "claim", klog.KRef(c.Namespace, c.Name))
	}
}
