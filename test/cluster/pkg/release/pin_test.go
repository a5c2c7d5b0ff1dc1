package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDigest is what the fake registry says image names: a digest of its
// name, so each image has its own.
func fakeDigest(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fakeResolver is a resolver command as `crane digest` is run: a script
// printing fakeDigest of its argument, and recording each call in log.
func fakeResolver(t *testing.T) (argv []string, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls")
	script := filepath.Join(dir, "resolve")
	body := fmt.Sprintf("#!/bin/sh\nset -e\necho \"$@\" >> %q\nprintf 'sha256:%%s\\n' \"$(printf %%s \"$1\" | sha256sum | cut -d' ' -f1)\"\n", log)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{script}, log
}

// TestPinImages: each pulled image gets @<the resolver's digest> of its
// name and tag after ARG substitution, ARGs stay as written, an old digest
// is replaced, stages and scratch and every other byte stay as they were.
func TestPinImages(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "tag", in: "FROM golang:1.26-bookworm AS build\nRUN true\n",
			want: "FROM golang:1.26-bookworm@" + fakeDigest("golang:1.26-bookworm") + " AS build\nRUN true\n"},
		{name: "ARG kept", in: "ARG V=1.26\nFROM  --platform=$BUILDPLATFORM  golang:${V}-bookworm   AS build\n",
			want: "ARG V=1.26\nFROM  --platform=$BUILDPLATFORM  golang:${V}-bookworm@" + fakeDigest("golang:1.26-bookworm") + "   AS build\n"},
		{name: "old digest replaced", in: "FROM gcr.io/distroless/base-debian12@" + digestA + "\n",
			want: "FROM gcr.io/distroless/base-debian12@" + fakeDigest("gcr.io/distroless/base-debian12") + "\n"},
		{name: "tag and old digest", in: "FROM alpine:3@" + digestB + "\n",
			want: "FROM alpine:3@" + fakeDigest("alpine:3") + "\n"},
		{name: "stages, scratch, COPY --from", in: "FROM scratch AS a\nFROM a\nCOPY --from=a /x /x\nCOPY --from=busybox:1 /bin/sh /sh\n",
			want: "FROM scratch AS a\nFROM a\nCOPY --from=a /x /x\nCOPY --from=busybox:1@" + fakeDigest("busybox:1") + " /bin/sh /sh\n"},
		{name: "continuation, no final newline", in: "FROM \\\n  alpine:3 \\\n  AS x",
			want: "FROM \\\n  alpine:3@" + fakeDigest("alpine:3") + " \\\n  AS x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			argv, _ := fakeResolver(t)
			got, err := PinImages(context.Background(), tc.in, CommandResolver(argv))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("pinned\n%s\nwant\n%s", got, tc.want)
			}
			if p := CheckDockerfile("Dockerfile", got); len(p) > 0 {
				t.Errorf("pinned file still refused: %q", p)
			}
		})
	}
}

// TestPinImagesResolvesEachImageOnce: the same image on several lines is
// one registry question.
func TestPinImagesResolvesEachImageOnce(t *testing.T) {
	argv, log := fakeResolver(t)
	in := "ARG V=1\nFROM alpine:$V AS a\nFROM alpine:1 AS b\nFROM alpine:${V}\n"
	if _, err := PinImages(context.Background(), in, CommandResolver(argv)); err != nil {
		t.Fatal(err)
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if string(calls) != "alpine:1\n" {
		t.Errorf("resolver called with %q, want alpine:1 once", calls)
	}
}

// TestPinImagesErrors: what the resolver cannot answer, or answers with
// something other than a sha256 digest, fails the pin naming the image.
func TestPinImagesErrors(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) []string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return []string{p}
	}
	tests := []struct {
		name    string
		in      string
		resolve Resolver
		want    []string
	}{
		{"resolver fails", "FROM alpine:3\n", CommandResolver(script("fail", "echo 'no route to registry' >&2; exit 3")),
			[]string{"line 1", "resolve alpine:3", "exit status 3", "no route to registry"}},
		{"not a digest", "FROM alpine:3\n", CommandResolver(script("junk", "echo latest")),
			[]string{"resolve alpine:3", `printed "latest"`, "sha256:<64 hex>"}},
		{"no resolver", "FROM alpine:3\n", CommandResolver(nil), []string{"no resolver command"}},
		{"resolver not found", "FROM alpine:3\n", CommandResolver([]string{filepath.Join(dir, "crane"), "digest"}), []string{"resolve alpine:3", "crane digest"}},
		{"func gives a bad digest", "\nFROM alpine:3\n", func(context.Context, string) (string, error) { return "sha256:abc", nil },
			[]string{"line 2", "sha256:abc"}},
		{"ARG without default", "ARG B\nFROM $B\n", nil, []string{"line 2", "ARG B has no default"}},
		{"digest from an ARG", "ARG D=" + digestA + "\nFROM alpine@${D}\n", nil, []string{"line 2", "digest comes from an ARG"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PinImages(context.Background(), tc.in, tc.resolve)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
