package inventorycmd

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inspect/inspecttest"
)

func TestBuildInventoryUnknownNode(t *testing.T) {
	_, err := Build(inspecttest.Load(t, "dgx-h100.yaml"), []string{"dgx-h100-0", "ghost"})
	if err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("err = %v, want one naming node ghost", err)
	}
}
