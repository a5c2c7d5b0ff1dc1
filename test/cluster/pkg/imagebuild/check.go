package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// CheckLayout is the release check of one image's layout (WriteLayout's):
// every blob's content matches its digest, index.json holds one index
// tagged version, with exactly the platforms, each image labelled with
// version. It returns one message per problem.
func CheckLayout(dir, version string, platforms []Platform) []string {
	var out []string
	blobs := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return []string{err.Error()}
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(blobs, e.Name()))
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != e.Name() {
			out = append(out, fmt.Sprintf("blob sha256:%s holds content of sha256:%x", e.Name(), sum))
		}
	}
	desc, sizes, err := ReadLayout(dir)
	if err != nil {
		return append(out, err.Error())
	}
	if got := desc.Annotations[RefNameAnnotation]; got != version {
		out = append(out, fmt.Sprintf("index.json tags the index %q, want %q", got, version))
	}
	var got, want []string
	for _, s := range sizes {
		got = append(got, s.Platform)
	}
	for _, p := range platforms {
		want = append(want, p.String())
	}
	if !slices.Equal(got, want) {
		out = append(out, fmt.Sprintf("platforms %q, want %q", got, want))
	}
	for _, s := range sizes {
		if s.Version != version {
			out = append(out, fmt.Sprintf("%s image %s labelled version %q, want %q", s.Platform, s.Digest, s.Version, version))
		}
	}
	return out
}
