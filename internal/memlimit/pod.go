package memlimit

import (
	"fmt"
	"path"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// PodUIDAnnotations are the annotations that name a container's pod in
// the OCI config a CRI runtime writes, and so in the state a hook gets:
// containerd's CRI, then CRI-O's.
var PodUIDAnnotations = []string{"io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"}

// pod is the pod a container belongs to: its UID and its cgroup.
type pod struct{ UID, Cgroup string }

// podOf finds the pod of the container st is the state of, in cgroup cg:
// the pod's UID from the runtime's annotations, and its cgroup, the
// container's parent, which the kubelet names after the UID ("pod<uid>"
// with the cgroupfs driver, "kubepods-<qos>-pod<uid_>.slice" with
// systemd's). A limit on the pod's cgroup holds every container of the
// pod, the sandbox's and those that do not name the claim included: a
// sibling handed an open device allocates under it too. A container
// whose parent is not its pod's cgroup (a kubelet with cgroupsPerQOS off,
// a runtime that names no pod) fails: its limit would hold it alone.
func podOf(st specs.State, cg string) (pod, error) {
	var uid string
	for _, a := range PodUIDAnnotations {
		if uid = st.Annotations[a]; uid != "" {
			break
		}
	}
	if uid == "" {
		return pod{}, fmt.Errorf("the container's OCI state names no pod (annotation %s): the limit is set on a Kubernetes pod's cgroup", strings.Join(PodUIDAnnotations, " or "))
	}
	if err := checkName("pod UID", uid); err != nil {
		return pod{}, fmt.Errorf("the container's OCI state: %w", err)
	}
	parent := path.Dir(cg)
	base := path.Base(parent)
	if parent == "/" || !(strings.Contains(base, "pod"+uid) || strings.Contains(base, "pod"+strings.ReplaceAll(uid, "-", "_"))) {
		return pod{}, fmt.Errorf("the container's cgroup %s is not in a cgroup of its pod %s: the kubelet must give each pod a cgroup (cgroupsPerQOS, its default) for the limit to hold the whole pod", cg, uid)
	}
	return pod{UID: uid, Cgroup: parent}, nil
}
