package doctor

import (
	"fmt"
	"io"
	"strings"
)

// ChecksFailedError is returned when any check FAILed: the command exits 1
// after printing the findings, without printing the error or its usage
// again.
type ChecksFailedError struct {
	Failed, Warned int
}

func (e *ChecksFailedError) Error() string {
	return fmt.Sprintf("%d check(s) failed", e.Failed)
}

// Tally counts the findings by status.
func Tally(fs []Finding) (pass, warn, fail int) {
	for _, f := range fs {
		switch f.Status {
		case StatusPass:
			pass++
		case StatusWarn:
			warn++
		case StatusFail:
			fail++
		}
	}
	return pass, warn, fail
}

// Print prints one line per finding,
//
//	STATUS  CHECK  DETAIL  fix: WHAT TO DO
//
// with the check names padded to one width, then a summary line. It
// returns a *ChecksFailedError when any finding is a FAIL.
func Print(w io.Writer, fs []Finding) error {
	width := 0
	for _, f := range fs {
		width = max(width, len(f.Name()))
	}
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%-4s  %-*s  %s", f.Status, width, f.Name(), f.Detail)
		if f.Fix != "" && f.Status != StatusPass {
			fmt.Fprintf(&b, "  fix: %s", f.Fix)
		}
		b.WriteByte('\n')
	}
	pass, warn, fail := Tally(fs)
	fmt.Fprintf(&b, "\n%d checks: %d passed, %d warnings, %d failed\n", len(fs), pass, warn, fail)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if fail > 0 {
		return &ChecksFailedError{Failed: fail, Warned: warn}
	}
	return nil
}
