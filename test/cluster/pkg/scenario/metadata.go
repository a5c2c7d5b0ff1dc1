package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/record"
)

// MetadataMount is where a container finds its claims' device metadata
// files (KEP-5304, docs/claims.md), under the kubelet's fixed directory.
const MetadataMount = "/var/run/kubernetes.io/dra-device-attributes/"

// metadataFile ends the name of the driver's metadata file.
const metadataFile = "gpu.tessera.dev-metadata.json"

// IsMetadataFile reports whether a container path is one of the driver's
// device metadata files.
func IsMetadataFile(p string) bool {
	return strings.HasPrefix(p, MetadataMount) && strings.HasSuffix(p, metadataFile)
}

// DecodeMetadata decodes a device metadata file with the library a
// reader in the container would use.
func DecodeMetadata(data []byte) (*metadata.DeviceMetadata, error) {
	var md metadata.DeviceMetadata
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(bytes.NewReader(data)), &md); err != nil {
		return nil, err
	}
	return &md, nil
}

// AttrString is a metadata or slice attribute's value as text ("" for
// none).
func AttrString(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return *a.StringValue
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		return strconv.FormatBool(*a.BoolValue)
	case a.VersionValue != nil:
		return *a.VersionValue
	}
	return ""
}

// vmReads are the attributes a VMM reads from a passed GPU's metadata
// file: where the GPU is (KubeVirt's key) and the group it opens.
var vmReads = []resourceapi.QualifiedName{"resource.kubernetes.io/pciBusID", "iommuGroup", "passthrough"}

// printMetadata shows, for each passed GPU in a metadata file the
// container mounts, what a VMM reads there. Other devices' files are not
// shown: their containers are told their devices through the vendor's
// environment, which Print shows.
func printMetadata(w io.Writer, ctr *record.Container) {
	for _, m := range ctr.Mounts {
		if !IsMetadataFile(m.Destination) {
			continue
		}
		data, err := os.ReadFile(m.Source)
		if err != nil {
			fmt.Fprintf(w, "    metadata %s: %v\n", m.Destination, err)
			continue
		}
		md, err := DecodeMetadata(data)
		if err != nil {
			fmt.Fprintf(w, "    metadata %s: decode %s: %v\n", m.Destination, m.Source, err)
			continue
		}
		for _, r := range md.Requests {
			for _, d := range r.Devices {
				if AttrString(d.Attributes["passthrough"]) != "true" {
					continue
				}
				var kv []string
				for _, k := range vmReads {
					kv = append(kv, string(k)+"="+AttrString(d.Attributes[k]))
				}
				fmt.Fprintf(w, "    metadata %s says of %s/%s: %s\n", m.Destination, d.Pool, d.Name, strings.Join(kv, " "))
			}
		}
	}
}
