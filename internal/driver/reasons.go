package driver

import (
	"errors"

	"github.com/tessera-gpu/tessera/internal/claims"
	"github.com/tessera-gpu/tessera/internal/metrics"
)

// reasonKinds maps the claims package's error kinds to the metrics' reason
// label. claims knows nothing of metrics and metrics nothing of claims; this
// is where the two meet.
var reasonKinds = []struct {
	kind   error
	reason string
}{
	{claims.ErrNotAllocated, metrics.ReasonNotAllocated},
	{claims.ErrDeviceNotOnNode, metrics.ReasonDeviceNotOnNode},
	{claims.ErrDeviceInUse, metrics.ReasonDeviceInUse},
	{claims.ErrConfigRejected, metrics.ReasonConfigRejected},
	{claims.ErrCDI, metrics.ReasonCDIWrite},
	{claims.ErrCheckpoint, metrics.ReasonCheckpoint},
	{claims.ErrPartition, metrics.ReasonPartition},
	{claims.ErrSharing, metrics.ReasonSharing},
	{claims.ErrPassthrough, metrics.ReasonPassthrough},
}

// errorReason is the metrics reason for a prepare or unprepare error; ""
// for none.
func errorReason(err error) string {
	if err == nil {
		return ""
	}
	for _, k := range reasonKinds {
		if errors.Is(err, k.kind) {
			return k.reason
		}
	}
	return metrics.ReasonOther
}

// releasedLabels maps the claims package's evidence for releasing a stale
// claim to the metrics' evidence label.
var releasedLabels = map[claims.Evidence]string{
	claims.EvidenceUnconfirmed: metrics.ReleasedUnconfirmed,
	claims.EvidenceDeleted:     metrics.ReleasedDeleted,
	claims.EvidenceReplaced:    metrics.ReleasedReplaced,
	claims.EvidenceDeallocated: metrics.ReleasedDeallocated,
}

func releasedLabel(ev claims.Evidence) string { return releasedLabels[ev] }
