package localcluster

import (
	"fmt"
	"os"
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
