package release

import (
	"strings"
	"testing"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// TestCheckDockerfile: every image pulled without a sha256 digest is
// refused at its instruction's first line, after ARG defaults are substituted; stages, scratch
// and pinned images pass.
func TestCheckDockerfile(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // "line: words of the message", nil: passes
	}{
		{name: "pinned", file: "FROM golang:1.26-bookworm@" + digestA + " AS build\nFROM gcr.io/distroless/base-debian12@" + digestB + "\n"},
		{name: "pinned without tag", file: "FROM docker.io/library/golang@" + digestA + "\n"},
		{name: "tag only", file: "FROM golang:1.26-bookworm AS build\n",
			want: []string{"1: FROM golang:1.26-bookworm: not pinned by digest"}},
		{name: "neither tag nor digest", file: "\n\nFROM busybox\n", want: []string{"3: FROM busybox: not pinned"}},
		{name: "registry with port", file: "FROM localhost:5000/x/y:1\n", want: []string{"1: FROM localhost:5000/x/y:1: not pinned"}},
		{name: "short digest", file: "FROM golang@sha256:abc\n", want: []string{"1: FROM golang@sha256:abc: not an image reference"}},
		{name: "upper-case digest", file: "FROM golang@" + strings.ToUpper(digestA[7:]) + "\n", want: []string{"1: FROM"}},
		{name: "sha512 digest", file: "FROM golang@sha512:" + strings.Repeat("a", 128) + "\n", want: []string{"1: FROM golang@sha512:"}},
		{name: "stage reference", file: "FROM scratch AS base\nFROM base AS final\nFROM BASE\n"},
		{name: "scratch", file: "FROM scratch\nFROM Scratch\n"},
		{name: "a stage's name before it is defined is an image", file: "FROM later\nFROM scratch AS later\n",
			want: []string{"1: FROM later: not pinned"}},
		{name: "platform flag", file: "FROM --platform=$BUILDPLATFORM golang:1.26@" + digestA + "\nFROM --platform=linux/arm64 alpine:3 AS x\n",
			want: []string{"2: FROM alpine:3: not pinned"}},
		{name: "ARG default pinned", file: "ARG GO_VERSION=1.26\nARG BASE=gcr.io/distroless/base@" + digestB + "\nFROM golang:${GO_VERSION}-bookworm@" + digestA + "\nFROM $BASE\n"},
		{name: "ARG default unpinned", file: "ARG GO_VERSION=1.26\nFROM golang:${GO_VERSION}-bookworm AS build\n",
			want: []string{"2: FROM golang:1.26-bookworm (golang:${GO_VERSION}-bookworm): not pinned"}},
		{name: "ARG quoted default and :- fallback", file: "ARG V=\"1.26\"\nARG EMPTY\nFROM golang:${V}-${EMPTY:-bookworm}\n",
			want: []string{"3: FROM golang:1.26-bookworm ("}},
		{name: "ARG without default", file: "ARG BASE\nFROM ${BASE}\n", want: []string{"2: FROM ${BASE}: ARG BASE has no default"}},
		{name: "no such ARG", file: "FROM golang:$NOPE\n", want: []string{"1: FROM golang:$NOPE: $NOPE is not an ARG in scope"}},
		{name: "a stage's ARG does not reach the next FROM", file: "FROM scratch\nARG V=1\nFROM golang:$V\n",
			want: []string{"3: FROM golang:$V: $V is not an ARG in scope"}},
		{name: "ARG naming a stage", file: "ARG FROM_STAGE=build\nFROM scratch AS build\nFROM ${FROM_STAGE}\n"},
		{name: "COPY --from an image", file: "FROM scratch AS a\nCOPY --from=a /x /x\nCOPY --from=0 /x /x\nCOPY --chown=0:0 --from=busybox:1 /bin/sh /sh\n",
			want: []string{"4: COPY --from busybox:1: not pinned"}},
		{name: "COPY --from a pinned image", file: "FROM scratch\nCOPY --from=busybox:1@" + digestA + " /bin/sh /sh\n"},
		{name: "continuation, comments and case", file: "# a comment: FROM busybox\nfrom \\\n  # inside\n  busybox:1 \\\n  as x\n",
			want: []string{"2: FROM busybox:1"}},
		{name: "heredoc body is not an instruction", file: "FROM scratch\nRUN <<EOF\nFROM busybox\nEOF\nFROM alpine\n",
			want: []string{"5: FROM alpine"}},
		{name: "escape directive", file: "# escape=`\n\nFROM `\n  alpine:3\n", want: []string{"3: FROM alpine:3"}},
		{name: "FROM without image", file: "FROM\n", want: []string{"1: FROM"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckDockerfile("Dockerfile", tc.file)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d: %q", got, len(tc.want), tc.want)
			}
			for i, p := range got {
				s := p.String()
				if !strings.HasPrefix(s, "Dockerfile:"+tc.want[i]) {
					t.Errorf("problem %q, want it to start Dockerfile:%s", s, tc.want[i])
				}
				if strings.Contains(s, "not pinned") && !strings.Contains(s, "want name[:tag]@sha256:<64 hex> (make release-pin-images)") {
					t.Errorf("problem %q does not say what is wanted", s)
				}
			}
		})
	}
}

func TestDockerfileImages(t *testing.T) {
	got, err := DockerfileImages(`FROM golang:1 AS build
RUN go build -o /out/a ./a
FROM scratch AS one
COPY --from=build /out/a /usr/bin/a
COPY --from=build /out/b /out/c /usr/bin/
USER 65532:65532
ENTRYPOINT ["/usr/bin/a", "serve"]
FROM one AS two
COPY --from=build /out/d /usr/bin/d
USER 0:0
`)
	if err != nil {
		t.Fatal(err)
	}
	one, two := got["one"], got["two"]
	if one.Base != "scratch" || one.User != "65532:65532" || strings.Join(one.Entrypoint, " ") != "/usr/bin/a serve" ||
		strings.Join(one.Files, " ") != "/usr/bin/a /usr/bin/b /usr/bin/c" {
		t.Errorf("one = %+v", one)
	}
	if two.Base != "scratch" || two.User != "0:0" || strings.Join(two.Entrypoint, " ") != "/usr/bin/a serve" ||
		strings.Join(two.Files, " ") != "/usr/bin/a /usr/bin/b /usr/bin/c /usr/bin/d" {
		t.Errorf("two = %+v", two)
	}
	if _, err := DockerfileImages("FROM x AS y\nENTRYPOINT /bin/sh -c x\n"); err == nil {
		t.Error("shell-form ENTRYPOINT taken")
	}
}
