package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profileArgs let the profiler reach the scheduler's /debug/pprof without
// credentials: the control plane is the benchmark's own, on 127.0.0.1.
var profileArgs = []string{"--profiling=true", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/*"}

// schedulerProfile takes a CPU profile of the kube-scheduler listening on
// port for d and writes it to path. The scheduler serves its own
// self-signed certificate, hence no verification.
func schedulerProfile(ctx context.Context, port int, d time.Duration, path string) error {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a local benchmark's own scheduler
	url := fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("scheduler profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("scheduler profile: %s: %s", resp.Status, b)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("scheduler profile %s: %w", path, err)
	}
	return f.Close()
}
