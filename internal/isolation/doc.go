// Package isolation says how far a GPU share holds against the tenant
// using it: kernel (a cgroup memory limit the tenant cannot lift),
// process (limits the tenant's own processes apply, such as MPS client
// variables), or none (the scheduler's accounting only). It reads what the
// node offers (cgroup v2, the dmem controller and its regions) and judges
// each GPU or partition against its vendor's rules, listing every reason a
// stronger level is out of reach, so that the published attribute, the
// claim's status and the logs say the same thing (docs/sharing.md).
package isolation
