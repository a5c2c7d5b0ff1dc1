// Package repofiles holds the repository's checks of itself: git tracks no
// build output (an executable or object file) and no file over 1 MiB
// without a SOURCE.md beside it that names it and says why; and no product
// code outside the vendor packages, the backends and the simulator names a
// vendor or partition kind (vendor rules live in internal/gpuvendor). It
// has no code of its own; its tests are the checks, run by `make unit`.
package repofiles
