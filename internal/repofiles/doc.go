// Package repofiles holds the repository's check of what git tracks: no
// build output (an executable or object file) and no file over 1 MiB
// without a SOURCE.md beside it that names it and says why. It has no code
// of its own; its test is the check, run by `make unit`.
package repofiles
