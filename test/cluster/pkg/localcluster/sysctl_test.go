package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSysctlsSurviveAHarnessKilledBeforeDown: the kubelets change the
// host's sysctls; a harness killed before Down leaves them changed, and the
// next Up must still put back the host's values, not the kubelets'. Down
// then forgets the machine-wide copy.
func TestSysctlsSurviveAHarnessKilledBeforeDown(t *testing.T) {
	dir := t.TempDir()
	oldProc, oldSave := procSys, sysctlSaveFile
	procSys, sysctlSaveFile = filepath.Join(dir, "proc"), filepath.Join(dir, "run", "sysctls.json")
	t.Cleanup(func() { procSys, sysctlSaveFile = oldProc, oldSave })
	set := func(vals map[string]string) {
		for k, v := range vals {
			p := filepath.Join(procSys, k)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	host := map[string]string{"vm/overcommit_memory": "0", "kernel/panic": "0", "kernel/panic_on_oops": "0"}
	kubelet := map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"}
	set(host)

	if _, err := saveSysctls(); err != nil { // the first Up
		t.Fatal(err)
	}
	set(kubelet)                // its kubelets start; the harness is killed here
	saved, err := saveSysctls() // the next Up
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range host {
		if saved[k] != v {
			t.Errorf("the second Up saved %s=%q, want the host's %q", k, saved[k], v)
		}
	}
	if errs := restoreSysctls(saved); len(errs) > 0 { // its Down
		t.Fatal(errs)
	}
	for k, v := range host {
		b, _ := os.ReadFile(filepath.Join(procSys, k))
		if strings.TrimSpace(string(b)) != v {
			t.Errorf("after Down %s=%q, want the host's %q", k, b, v)
		}
	}
	if _, err := os.Stat(sysctlSaveFile); !os.IsNotExist(err) {
		t.Errorf("the machine-wide copy is still there after Down: %v", err)
	}
}
