// Package handover makes sure that one agent at a time serves a node. An
// agent takes the node's lock, a file under the kubelet plugin's data
// directory, before it touches any state of the node (the checkpoint, the
// CDI specs, partitions, MPS daemons, the simulator's state) and holds it
// until it exits; the kernel releases it then, however the process ends.
//
// During a rolling update with surge (the chart's rollingUpdate), the new
// agent starts while the old one still serves. It registers with the
// kubelet at once, in standby (internal/driver.StartStandby), so the calls the
// kubelet sends it wait instead of failing, and waits for the lock; when
// the old agent exits, the new one takes the lock, reads the state the old
// one left and serves, the waiting calls first. Two agents never act on
// the node at once: the one without the lock has no state to act on.
package handover
