package agent

import (
	"strings"
	"testing"
)

// TestValidateIMEX: --imex-channels off by default, bounded, and needing a
// namespace for the domain's lease (the flag's or the pod's).
func TestValidateIMEX(t *testing.T) {
	for _, tc := range []struct {
		name          string
		channels      int
		ns, podNS     string
		wantNS, error string
	}{
		{name: "off", channels: 0},
		{name: "from the pod", channels: 127, podNS: "tessera-system", wantNS: "tessera-system"},
		{name: "flag over pod", channels: 127, ns: "imex", podNS: "tessera-system", wantNS: "imex"},
		{name: "no namespace", channels: 1, error: "--imex-namespace (or POD_NAMESPACE) is required"},
		{name: "negative", channels: -1, podNS: "x", error: "--imex-channels=-1"},
		{name: "beyond the driver's channels", channels: 2048, podNS: "x", error: "1 to 2047"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.podNS)
			c := Config{IMEXChannels: tc.channels, IMEXNamespace: tc.ns}
			err := c.validateIMEX()
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Errorf("error %v, want %q", err, tc.error)
				}
				return
			}
			if err != nil || c.IMEXNamespace != tc.wantNS {
				t.Errorf("%v, namespace %q; want %q", err, c.IMEXNamespace, tc.wantNS)
			}
		})
	}
}
