package doctor

import (
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/internal/names"
)

// ShippedDeviceClasses are the DeviceClasses of internal/deviceclasses
// (and of the chart), which claims name.
var ShippedDeviceClasses = names.DeviceClasses

// checkDeviceClasses: the shipped DeviceClasses are installed.
func checkDeviceClasses(in *Input, _ []*target) []Finding {
	return []Finding{deviceClassesFinding(in)}
}

func deviceClassesFinding(in *Input) Finding {
	f := Finding{Check: CheckDeviceClasses}
	if in.ClassesErr != "" {
		f.Status, f.Detail = StatusWarn, "could not list DeviceClasses: "+in.ClassesErr
		f.Fix = "run as a user allowed to list deviceclasses.resource.k8s.io"
		return f
	}
	have := map[string]bool{}
	for _, c := range in.Classes {
		have[c.Name] = true
	}
	var missing []string
	for _, c := range ShippedDeviceClasses {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		f.Status = StatusFail
		f.Detail = fmt.Sprintf("missing %d of %d DeviceClasses: %s (claims naming them stay pending)", len(missing), len(ShippedDeviceClasses), strings.Join(missing, ", "))
		f.Fix = "install the chart (deployments/helm/tessera): it creates them (values deviceClasses.*)"
		return f
	}
	f.Status = StatusPass
	f.Detail = fmt.Sprintf("all %d installed: %s", len(ShippedDeviceClasses), strings.Join(ShippedDeviceClasses, ", "))
	return f
}
