// Package daemonpod runs MPS control daemons as pods of the agent's node,
// an mps.Launcher for agents that run as the chart's pod.
//
// A daemon serves running CUDA clients through its pipes; if it dies, they
// fail. As a child of the agent it would live in the agent container's PID
// namespace and cgroup and die with it (a crash, a rolling update). As a
// pod of its own, pinned to the node by spec.nodeName and owned by the
// Node, it outlives the agent's container and pod: the next agent finds it
// (Find) and adopts it.
//
// The pod is the least-privilege contract the chart's admission policy
// checks field by field (docs/security.md): the agent's own image, one
// container, the daemon's directory as its only volume, no service account
// token, no host namespaces, and privileged only where the backend needs
// the GPU device nodes (nvml). restartPolicy is Never: a daemon the kubelet
// restarted would come back without the settings the Manager applies after
// launch, so a dead daemon is the Manager's to replace.
package daemonpod
