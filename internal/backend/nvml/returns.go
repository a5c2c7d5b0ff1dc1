//go:build cgo && linux

package nvml

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// callError is a failed NVML call: which call, on what, and NVML's code,
// so a logged reason says what to look at and callers can test the code.
type callError struct {
	call string
	ret  nvml.Return
}

func (e *callError) Error() string { return fmt.Sprintf("%s: %s", e.call, e.ret.Error()) }

// check turns an NVML return into an error (nil on SUCCESS).
func check(call string, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return &callError{call: call, ret: ret}
}

// is reports whether err is a failed NVML call that returned ret.
func is(err error, ret nvml.Return) bool {
	var ce *callError
	return errors.As(err, &ce) && ce.ret == ret
}

// notSupported: the GPU or driver lacks the feature, which is an answer
// ("no NVLink", "no MIG"), not a fault.
func notSupported(err error) bool {
	return is(err, nvml.ERROR_NOT_SUPPORTED) || is(err, nvml.ERROR_FUNCTION_NOT_FOUND)
}
