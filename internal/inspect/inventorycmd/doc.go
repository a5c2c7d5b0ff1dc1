// Package inventorycmd is `kubectl tessera inventory`: one row per physical
// GPU of the fleet (its partitions below it), who holds it, and a summary
// per node and for the fleet.
//
//   - inventory.go: the view (types with json tags, the -o json / -o yaml
//     output).
//   - build.go: building it from a Snapshot.
//   - print.go: printing it as a table, JSON or YAML.
package inventorycmd
