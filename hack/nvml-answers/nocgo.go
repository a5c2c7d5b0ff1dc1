//go:build !cgo || !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "nvml-answers needs a cgo build (CGO_ENABLED=1) on linux")
	os.Exit(1)
}
