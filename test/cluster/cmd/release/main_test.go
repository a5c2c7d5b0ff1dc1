package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repo is a copy of the repository's Dockerfile and krew template, laid out
// as in the repository, so that the commands can write beside them.
func repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"deployments/Dockerfile", "deployments/krew/tessera.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../../..", f))
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(dir, f), string(data), 0o644)
	}
	return dir
}

func writeTestFile(t *testing.T, path, data string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}

func runRelease(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	code := run(context.Background(), args, &stderr, func(k string) string { return env[k] })
	return code, stderr.String()
}

// TestCommands: the release steps in the order docs/development.md gives:
// the committed Dockerfile is refused, pin-images (a fake registry) makes it
// pass, and krew writes a manifest that check takes for its version only.
func TestCommands(t *testing.T) {
	dir := repo(t)
	r := "--repo=" + dir

	code, out := runRelease(t, nil, "check", r)
	if code != 1 || !strings.Contains(out, "deployments/Dockerfile:") || !strings.Contains(out, "not pinned by digest") {
		t.Fatalf("check of the committed Dockerfile: exit %d\n%s", code, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "deployments/Dockerfile:") {
			t.Errorf("check line %q does not start with file:line", line)
		}
	}

	resolver := filepath.Join(dir, "fake-crane")
	writeTestFile(t, resolver, "#!/bin/sh\n[ \"$1\" = digest ] || exit 2\nprintf 'sha256:%s\\n' \"$(printf %s \"$2\" | sha256sum | cut -d' ' -f1)\"\n", 0o755)
	env := map[string]string{resolverEnv: resolver + " digest"}
	if code, out := runRelease(t, env, "pin-images", r, "--out=pinned/Dockerfile"); code != 0 {
		t.Fatalf("pin-images to another file: exit %d\n%s", code, out)
	}
	if code, out := runRelease(t, nil, "check", r, "--dockerfile=pinned/Dockerfile"); code != 0 {
		t.Errorf("check of the pinned Dockerfile: exit %d\n%s", code, out)
	}
	if code, _ := runRelease(t, nil, "check", r); code != 1 {
		t.Error("pin-images --out changed the Dockerfile it read")
	}
	if code, out := runRelease(t, env, "pin-images", r); code != 0 {
		t.Fatalf("pin-images in place: exit %d\n%s", code, out)
	}
	if code, out := runRelease(t, nil, "check", r); code != 0 {
		t.Errorf("check after pin-images in place: exit %d\n%s", code, out)
	}
	if code, out := runRelease(t, nil, "pin-images", r, "--resolver="+filepath.Join(dir, "no-such-crane")+" digest"); code != 1 || !strings.Contains(out, "no-such-crane") {
		t.Errorf("pin-images with a resolver that is not there: exit %d\n%s", code, out)
	}

	dist := filepath.Join(dir, "dist")
	for _, p := range []string{"linux_amd64", "linux_arm64", "darwin_amd64"} {
		writeTestFile(t, filepath.Join(dist, "kubectl-tessera_"+p+".tar.gz"), p, 0o644)
	}
	code, out = runRelease(t, nil, "krew", r, "--version=v0.1.0", "--dist="+dist)
	if code != 1 || !strings.Contains(out, "platform darwin/arm64") || !strings.Contains(out, "kubectl-tessera_darwin_arm64.tar.gz") {
		t.Errorf("krew without the darwin/arm64 archive: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "_output/release/tessera.yaml")); !os.IsNotExist(err) {
		t.Errorf("krew wrote a manifest without every archive: %v", err)
	}
	writeTestFile(t, filepath.Join(dist, "kubectl-tessera_darwin_arm64.tar.gz"), "darwin_arm64", 0o644)
	if code, out := runRelease(t, nil, "krew", r, "--version=v0.1.0", "--dist="+dist); code != 0 {
		t.Fatalf("krew: exit %d\n%s", code, out)
	}
	m := "--manifest=_output/release/tessera.yaml"
	if code, out := runRelease(t, nil, "check", r, m, "--version=v0.1.0"); code != 0 {
		t.Errorf("check of the filled manifest: exit %d\n%s", code, out)
	}
	if code, out := runRelease(t, nil, "check", r, m, "--version=v0.2.0"); code != 1 || !strings.Contains(out, `want "v0.2.0"`) {
		t.Errorf("check of the manifest for another version: exit %d\n%s", code, out)
	}
	if code, out := runRelease(t, nil, "check", r, "--manifest=deployments/krew/tessera.yaml", "--version=v0.1.0"); code != 1 || !strings.Contains(out, "deployments/krew/tessera.yaml:") {
		t.Errorf("check of the template: exit %d\n%s", code, out)
	}
}

// TestUsage: a command line that asks for nothing known exits 2.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"publish"}, {"check", "extra"}, {"check", "--no-such-flag"}} {
		if code, out := runRelease(t, nil, args...); code != 2 || out == "" {
			t.Errorf("%q: exit %d, %q", args, code, out)
		}
	}
	if code, out := runRelease(t, nil, "check", "--manifest=x.yaml"); code != 1 || !strings.Contains(out, "--version is required") {
		t.Errorf("check --manifest without --version: exit %d, %q", code, out)
	}
}
