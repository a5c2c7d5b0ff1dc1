package amdsysfs

import (
	"sort"
	"strings"
)

// unidentified collects, over one read, the GPUs whose model the device ID
// table does not give, by reason; the reason names the device ID (model),
// so a host of eight GPUs of one new ID has one reason and one log line.
type unidentified map[string][]string

func (u unidentified) add(why, gpu string) {
	if why != "" {
		u[why] = append(u[why], gpu)
	}
}

// sayUnidentified logs each reason once with every GPU it applies to, and
// again only when that set of GPUs changes: each GPU is still counted in
// tessera_gpu_values_unknown{value="model"} (record), but an operator needs
// one line per device ID to add to the table, not one per GPU per re-read.
func (b *Backend) sayUnidentified(u unidentified) {
	whys := make([]string, 0, len(u))
	for why := range u {
		whys = append(whys, why)
	}
	sort.Strings(whys)
	for _, why := range whys {
		key, gpus := "model|"+why, strings.Join(u[why], ",")
		if b.said[key] == gpus {
			continue
		}
		b.said[key] = gpus
		b.log.Info("AMD GPU model not identified", "detail", why, "pciBusIDs", u[why])
	}
}
