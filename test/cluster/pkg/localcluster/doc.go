// Package localcluster runs a real Kubernetes control plane and one real
// kubelet per simulated GPU node on 127.0.0.1, without containers: etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager, Tessera's
// admission webhook (tessera-webhook, registered with the chart's own
// webhook configuration), and per node a kubelet, its fake container runtime
// and its tessera-kubelet-plugin.
//
// All state lives under one directory (pki, etcd data, node dirs, logs, a
// state file with every pid, port, saved sysctl), except each node's socket
// directory (kubelet root, CRI socket), which sits in the temp dir because
// unix socket paths are limited to 107 bytes (see RunDir), and the host's
// sysctl values from before any kubelet changed them, kept machine-wide on
// tmpfs until a Down puts them back (sysctl.go). Down stops what the state
// file names, restores the sysctls the kubelets changed and unmounts what they
// mounted under that directory; it is safe to run twice, and Up runs it first
// so a failed or killed run never blocks the next.
package localcluster
