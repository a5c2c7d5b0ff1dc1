package localcluster

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
)

// writeKubeconfig writes a kubeconfig for a client certificate issued by p.
func (p *pki) writeKubeconfig(path, server, certName string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: local
  context: {cluster: local, user: %s}
current-context: local
`, server, p.path("ca.crt"), certName, p.path(certName+".crt"), p.path(certName+".key"), certName)
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
