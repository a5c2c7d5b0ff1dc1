package version

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// FlagName is the flag every Tessera binary answers with its version.
const FlagName = "version"

// Flag is --version as component-base's verflag reads it: --version (or
// =true) prints the version line, --version=raw the Go value, =false
// nothing. Unlike verflag it is not a process-wide flag and prints this
// program's name, not "Kubernetes".
type Flag struct{ value string }

// AddFlag registers --version on fs.
func AddFlag(fs *pflag.FlagSet) *Flag {
	f := &Flag{value: "false"}
	fs.Var(f, FlagName, "print the version, commit and build date and exit (--version=raw: every field)")
	fs.Lookup(FlagName).NoOptDefVal = "true"
	return f
}

func (f *Flag) String() string { return f.value }
func (f *Flag) Type() string   { return "version" }

// Set takes true, false (and strconv.ParseBool's other spellings) or raw.
func (f *Flag) Set(s string) error {
	if s == "raw" {
		f.value = s
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true, false or raw")
	}
	f.value = strconv.FormatBool(b)
	return nil
}

// Requested says whether --version was given (true or raw).
func (f *Flag) Requested() bool { return f.value != "false" }

// Raw says whether --version=raw was given.
func (f *Flag) Raw() bool { return f.value == "raw" }
