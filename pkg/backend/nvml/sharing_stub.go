//go:build cgo && linux

package nvml

import (
	"context"

	"github.com/tessera-gpu/tessera/pkg/backend"
)

// Placeholder until the sharing implementation lands (being written now).

func (b *Backend) SetTimeSlice(context.Context, string, backend.TimeSlice) error {
	return backend.ErrSharingNotSupported
}
func (b *Backend) StartMPS(context.Context, backend.MPSDaemonSpec) (*backend.MPSDaemon, error) {
	return nil, backend.ErrSharingNotSupported
}
func (b *Backend) StopMPS(context.Context, string) error { return nil }
func (b *Backend) MPSDaemons(context.Context) ([]backend.MPSDaemonState, error) {
	return nil, nil
}
