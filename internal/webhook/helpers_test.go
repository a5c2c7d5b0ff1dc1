package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Opaque parameters used throughout.
const (
	timeSlicingLong = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`
	mpsGood         = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"4Gi"}}}`
	mpsThreads101   = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":101}}}`
	// Two errors in one config.
	mpsTwoBad      = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":0,"defaultPinnedDeviceMemoryLimit":"1Mi"}}}`
	partitionShort = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Short"}}}`
	unknownField   = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"threads":5}}}`
	otherVersion   = `{"apiVersion":"gpu.tessera.dev/v1","kind":"GpuConfig"}`
)

// tessera is a config entry of gpu.tessera.dev with params, for requests.
func tessera(params string, requests ...string) string {
	return entry("gpu.tessera.dev", params, requests...)
}

func entry(driver, params string, requests ...string) string {
	r := ""
	if len(requests) > 0 {
		b, _ := json.Marshal(requests)
		r = `"requests":` + string(b) + `,`
	}
	return `{` + r + `"opaque":{"driver":"` + driver + `","parameters":` + params + `}}`
}

func configList(entries []string) string {
	if len(entries) == 0 {
		return ""
	}
	return `,"config":[` + strings.Join(entries, ",") + `]`
}

const request = `"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.tessera.dev","allocationMode":"ExactCount","count":1}}]`

// claimJSON is a ResourceClaim as the API server encodes it.
func claimJSON(ns, name string, entries ...string) string {
	return `{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"` + name + `","namespace":"` + ns +
		`","uid":"11111111-2222-3333-4444-555555555555","creationTimestamp":"2026-07-01T10:00:00Z"},"spec":{"devices":{` +
		request + configList(entries) + `}},"status":{}}`
}

func templateJSON(ns, name string, entries ...string) string {
	return `{"kind":"ResourceClaimTemplate","apiVersion":"resource.k8s.io/v1","metadata":{"name":"` + name + `","namespace":"` + ns +
		`","uid":"11111111-2222-3333-4444-666666666666","creationTimestamp":"2026-07-01T10:00:00Z"},"spec":{"metadata":{},"spec":{"devices":{` +
		request + configList(entries) + `}}}}`
}

func classJSON(name string, entries ...string) string {
	return `{"kind":"DeviceClass","apiVersion":"resource.k8s.io/v1","metadata":{"name":"` + name +
		`","uid":"11111111-2222-3333-4444-777777777777","creationTimestamp":"2026-07-01T10:00:00Z"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \"gpu.tessera.dev\""}}]` +
		configList(entries) + `}}`
}

// kindInfo: group, version, kind and resource of what a review is about.
type kindInfo struct{ group, version, kind, resource string }

var (
	claimInfo    = kindInfo{"resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"}
	templateInfo = kindInfo{"resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates"}
	classInfo    = kindInfo{"resource.k8s.io", "v1", "DeviceClass", "deviceclasses"}
	podInfo      = kindInfo{"", "v1", "Pod", "pods"}
)

// reviewJSON is an AdmissionReview as the API server sends it (see
// testdata/claim-create-bad.json for a whole one). oldObject is for UPDATE.
func reviewJSON(k kindInfo, op, ns, name, object, oldObject string) []byte {
	if oldObject == "" {
		oldObject = "null"
	}
	gvk := fmt.Sprintf(`{"group":%q,"version":%q,"kind":%q}`, k.group, k.version, k.kind)
	gvr := fmt.Sprintf(`{"group":%q,"version":%q,"resource":%q}`, k.group, k.version, k.resource)
	opts := map[string]string{"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[op]
	nsField := ""
	if ns != "" {
		nsField = fmt.Sprintf(`"namespace":%q,`, ns)
	}
	return []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{` +
		`"uid":"0b1f6a9e-5a4c-4f43-9d2e-000000000001",` +
		`"kind":` + gvk + `,"resource":` + gvr + `,"requestKind":` + gvk + `,"requestResource":` + gvr + `,` +
		fmt.Sprintf(`"name":%q,`, name) + nsField + fmt.Sprintf(`"operation":%q,`, op) +
		`"userInfo":{"username":"tessera-admin","groups":["system:masters","system:authenticated"]},` +
		`"object":` + object + `,"oldObject":` + oldObject + `,"dryRun":false,` +
		`"options":{"kind":"` + opts + `","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-client-side-apply","fieldValidation":"Strict"}}}`)
}

// testCA issues serving certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "webhook-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns PEM certificate and key with serial, valid until notAfter.
func (ca *testCA) issue(t *testing.T, serial int64, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "tessera-webhook"},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// writeVersion writes data to path with modification time v seconds after
// a fixed instant, so that each version of a file has its own mtime
// whatever the file system's timestamp granularity.
func writeVersion(t *testing.T, path string, data []byte, v int) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	mt := time.Date(2026, 1, 1, 0, 0, v, 0, time.UTC)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// pair writes a certificate and key of serial as version v into dir.
func (ca *testCA) pair(t *testing.T, dir string, serial int64, v int) (certFile, keyFile string) {
	t.Helper()
	c, k := ca.issue(t, serial, time.Now().Add(time.Hour))
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeVersion(t, certFile, c, v)
	writeVersion(t, keyFile, k, v)
	return certFile, keyFile
}
