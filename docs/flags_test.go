package docs

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tessera-gpu/tessera/internal/agent"
)

// TestAgentFlagTable: operating.md's table of the agent's flags names
// every flag the agent has (agent.Config.AddFlags), and no other: a flag
// added without a row, or a row left after a flag is gone, fails here.
func TestAgentFlagTable(t *testing.T) {
	data, err := os.ReadFile("operating.md")
	if err != nil {
		t.Fatal(err)
	}
	flagRE := regexp.MustCompile("`--([a-z0-9-]+)`")
	var documented []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range flagRE.FindAllStringSubmatch(first, -1) {
			documented = append(documented, m[1])
		}
	}
	var cfg agent.Config
	fs := pflag.NewFlagSet("tessera-kubelet-plugin", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	var real []string
	fs.VisitAll(func(f *pflag.Flag) { real = append(real, f.Name) })
	sort.Strings(documented)
	for _, f := range real {
		if !slices.Contains(documented, f) {
			t.Errorf("--%s is an agent flag with no row in operating.md's flag table", f)
		}
	}
	for _, f := range documented {
		if !slices.Contains(real, f) {
			t.Errorf("operating.md's flag table has a row for --%s, which the agent does not have", f)
		}
	}
	if len(real) < 40 {
		t.Errorf("the agent has %d flags; the table check reads the wrong flag set", len(real))
	}
}
