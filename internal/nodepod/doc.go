// Package nodepod holds what the agent needs to run a helper daemon as a
// pod of its own node (the MPS control daemons, the IMEX daemon): the
// Node as the pods' owner, whether a pod still runs its daemon, and a
// delete that waits until the daemon is really gone. The pods themselves,
// and the admission policies that pin them, are their users'.
package nodepod
