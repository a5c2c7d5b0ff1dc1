package localcluster

import (
	"encoding/base64"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
)

// writeKubeconfig writes a kubeconfig for a client certificate issued by p.
func (p *pki) writeKubeconfig(path, server, certName string) error {
	// The credentials are embedded, not referenced by path: client-go caches
	// transports by certificate file path, so a process that brings a
	// cluster up twice in one directory (a benchmark) would otherwise reuse
	// the first cluster's CA and fail the second's TLS check.
	var data [3]string
	for i, f := range []string{"ca.crt", certName + ".crt", certName + ".key"} {
		b, err := os.ReadFile(p.path(f))
		if err != nil {
			return err
		}
		data[i] = base64.StdEncoding.EncodeToString(b)
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: local
  context: {cluster: local, user: %s}
current-context: local
`, server, data[0], certName, data[1], data[2], certName)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// Identity is a user the admin credentials impersonate: the API server
// authenticates the admin, then authorizes and admits each request as this
// user, with these groups and extras.
type Identity struct {
	User   string
	Groups []string
	Extra  map[string][]string
}

// ServiceAccountIdentity is what a pod-bound token of service account
// namespace/name authenticates as on a pod of node (Kubernetes 1.32+ puts
// the node's name into the token's user extra). node "" leaves it out, like a
// token that is not bound to a node.
func ServiceAccountIdentity(namespace, name, node string) Identity {
	id := Identity{
		User:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	if node != "" {
		id.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	return id
}

// WriteKubeconfigAs writes to path the admin kubeconfig with impersonation
// of id (as, as-groups, as-user-extra), so that a client using it, e.g. a
// node's plugin, has only id's permissions.
func (c *Config) WriteKubeconfigAs(path string, id Identity) error {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig())
	if err != nil {
		return err
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = id.User
		ai.ImpersonateGroups = id.Groups
		ai.ImpersonateUserExtra = id.Extra
	}
	return clientcmd.WriteToFile(*cfg, path)
}
