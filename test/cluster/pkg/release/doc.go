// Package release holds the checks and the fills a release needs before
// its artifacts are published (docs/development.md, Release):
//
//   - the Dockerfile's base images pinned by digest (CheckDockerfile), and
//     pinned from a resolver such as `crane digest` (PinImages), so that a
//     release image is built from exactly the bases it was tested with;
//   - the krew manifest filled with the release's version, archive URIs and
//     the archives' real sha256 (FillKrew), and refused while any
//     placeholder or malformed field is left (CheckKrew).
//
// No registry is reachable from the development machines: the resolver is a
// command, and the tests give a fake one.
package release
