package imexstandin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// FaultFileName is the fault file's name, beside the config file.
const FaultFileName = "imex-fault"

// FaultFile is the fault file of the daemon run with configFile.
func FaultFile(configFile string) string {
	return filepath.Join(filepath.Dir(configFile), FaultFileName)
}

// InjectFault makes the daemon of configFile fail within its FaultPoll:
// NOT_READY, its peers dropped. message, if any, is added to its status.
func InjectFault(configFile, message string) error {
	msg := strings.Join(strings.Fields(message), " ")
	if err := fsutil.WriteFileAtomic(FaultFile(configFile), []byte(msg+"\n"), 0o644); err != nil {
		return fmt.Errorf("inject IMEX fault: %w", err)
	}
	return nil
}

// ClearFault clears the fault InjectFault made; no fault is no error.
func ClearFault(configFile string) error {
	if err := os.Remove(FaultFile(configFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear IMEX fault: %w", err)
	}
	return nil
}

// watchFault checks the fault file every FaultPoll until ctx ends.
func (d *Daemon) watchFault(ctx context.Context) {
	t := time.NewTicker(d.FaultPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.checkFault(ctx)
		}
	}
}

// checkFault applies the fault file: there, a fault (its text the
// message); gone, none. A file it cannot read leaves the state as it is.
func (d *Daemon) checkFault(ctx context.Context) {
	logger := klog.FromContext(ctx)
	path := FaultFile(d.ConfigFile)
	data, err := os.ReadFile(path)
	on := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		logger.Error(err, "Reading the IMEX stand-in's fault file", "path", path)
		return
	}
	msg := strings.TrimSpace(string(data))
	if !d.state.setFault(on, msg) {
		return
	}
	if on {
		logger.Info("Injected fault: dropping every IMEX peer", "path", path, "message", msg)
	} else {
		logger.Info("Injected fault cleared: connecting to IMEX peers again", "path", path)
	}
}
