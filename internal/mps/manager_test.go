package mps

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestStartAppliesSettingsAndStop(t *testing.T) {
	tests := []struct {
		name string
		spec DaemonSpec
		want []string // commands the daemon received
	}{
		{
			name: "no settings",
			spec: DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}},
			want: []string{cmdProbe},
		},
		{
			name: "thread percentage",
			spec: DaemonSpec{ID: "claim-b", Devices: []string{"GPU-a"}, ActiveThreadPercentage: 30},
			want: []string{cmdProbe, "set_default_active_thread_percentage 30"},
		},
		{
			name: "pinned memory per device, in the claim's order, rounded down to MiB",
			spec: DaemonSpec{
				ID:                     "claim-c",
				Devices:                []string{"MIG-z", "GPU-a", "GPU-b"},
				ActiveThreadPercentage: 100,
				PinnedMemoryLimits:     map[string]int64{"GPU-a": 4<<30 + 123, "MIG-z": 1 << 20},
			},
			want: []string{
				cmdProbe,
				"set_default_active_thread_percentage 100",
				"set_default_device_pinned_mem_limit MIG-z 1M",
				"set_default_device_pinned_mem_limit GPU-a 4096M",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			m := newManager(t, t.TempDir())
			d := mustStart(t, ctx, m, tt.spec)
			if d.Adopted || d.PID <= 0 || d.ID != tt.spec.ID ||
				d.PipeDir != filepath.Join(m.Root(), tt.spec.ID, "pipe") || d.LogDir != filepath.Join(m.Root(), tt.spec.ID, "log") {
				t.Fatalf("Start = %+v", d)
			}
			st := status(t, d.PipeDir)
			if !slices.Equal(st.Commands, tt.want) {
				t.Errorf("daemon received\n%q\nwant\n%q", st.Commands, tt.want)
			}
			if st.PID != d.PID || !slices.Equal(st.Devices, tt.spec.Devices) {
				t.Errorf("daemon PID %d devices %v, want %d %v", st.PID, st.Devices, d.PID, tt.spec.Devices)
			}
			rec, err := readRecord(filepath.Join(m.Root(), tt.spec.ID))
			if err != nil || rec.PID != d.PID || rec.StartTime != startTime(t, d.PID) || rec.BootID != m.bootID || !slices.Equal(rec.Devices, tt.spec.Devices) {
				t.Errorf("record %+v, %v", rec, err)
			}
			// Detached: a session of its own, found by its environment.
			if ps, err := readStat(d.PID); err != nil || ps.session != d.PID {
				t.Errorf("daemon session %+v, %v: want its own", ps, err)
			}
			procs, err := scan(m.Root())
			if err != nil || len(procs) != 1 || procs[0].pid != d.PID || !slices.Equal(procs[0].devices, tt.spec.Devices) {
				t.Errorf("scan = %+v, %v", procs, err)
			}

			// Keep the log open: Stop removes the directory, the daemon
			// appends to the same file until it exits.
			logFile, err := os.Open(filepath.Join(d.LogDir, "control.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer logFile.Close()
			start := startTime(t, d.PID)
			if err := m.Stop(ctx, tt.spec.ID); err != nil {
				t.Fatal(err)
			}
			if alive(d.PID, start) {
				t.Error("daemon alive after Stop")
			}
			if dirExists(t, m, tt.spec.ID) {
				t.Error("daemon directory left after Stop")
			}
			logData, _ := io.ReadAll(logFile)
			if !strings.Contains(string(logData), "Exiting on quit") {
				t.Errorf("the daemon did not exit on quit:\n%s", logData)
			}
		})
	}
}

func TestAdoptAfterRestart(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	spec := DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a", "GPU-b"}, ActiveThreadPercentage: 50}
	first := mustStart(t, ctx, newManager(t, root), spec)

	// A new agent: a new manager over the same root.
	m := newManager(t, root)
	if list, err := m.List(ctx); err != nil || !slices.Equal(list, []DaemonState{{ID: "claim-a", Running: true}}) {
		t.Fatalf("List = %+v, %v", list, err)
	}
	again := mustStart(t, ctx, m, spec)
	if !again.Adopted || again.PID != first.PID || again.PipeDir != first.PipeDir {
		t.Fatalf("Start after restart = %+v, want the adopted %+v", again, first)
	}
	// Start on a running daemon is idempotent too.
	if d := mustStart(t, ctx, m, spec); !d.Adopted || d.PID != first.PID {
		t.Fatalf("second Start = %+v", d)
	}
	settings := []string{cmdProbe, "set_default_active_thread_percentage 50"}
	want := slices.Concat(settings, settings, settings)
	if got := status(t, first.PipeDir).Commands; !slices.Equal(got, want) {
		t.Errorf("daemon received\n%q\nwant the settings applied at each Start\n%q", got, want)
	}
}

// The agent that started the daemon exits; the daemon outlives it,
// reparented, and the next agent adopts and stops it.
func TestDaemonOutlivesAgentProcess(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	out, err := exec.Command(testBinary(t), "mps-test-agent", root, "claim-a", "GPU-a").Output()
	if err != nil {
		t.Fatalf("agent process: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("agent printed %q", out)
	}
	m := newManager(t, root)
	start := startTime(t, pid)
	if ppid := parentPID(t, pid); ppid == os.Getpid() {
		t.Fatalf("daemon PID %d is a child of the test, want it reparented", pid)
	}
	d := mustStart(t, ctx, m, DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}})
	if !d.Adopted || d.PID != pid {
		t.Fatalf("Start = %+v, want PID %d adopted", d, pid)
	}
	if err := m.Stop(ctx, "claim-a"); err != nil {
		t.Fatal(err)
	}
	if alive(pid, start) {
		t.Error("daemon alive after Stop")
	}
}

// An adopted daemon that does not answer is reported, not killed: its
// clients may still be served.
func TestAdoptedDaemonNotAnswering(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	spec := DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}}
	d := mustStart(t, ctx, newManager(t, root), spec)
	start := startTime(t, d.PID)
	// Without its control FIFO the stand-in can take no command.
	if err := os.Remove(filepath.Join(d.PipeDir, "control")); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Root: root, Control: fakeControl(t), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Start(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "adopted daemon") || !strings.Contains(err.Error(), "did not accept commands") {
		t.Fatalf("Start: %v, want the adopted daemon's failure", err)
	}
	if !alive(d.PID, start) {
		t.Error("Start killed an adopted daemon that did not answer")
	}
}

func TestStartRestartsKilledDaemon(t *testing.T) {
	ctx := testCtx(t)
	m := newManager(t, t.TempDir())
	spec := DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}, ActiveThreadPercentage: 20}
	first := mustStart(t, ctx, m, spec)
	start := startTime(t, first.PID)
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, first.PID, start)
	waitReaped(t, first.PID, start)

	if list, err := m.List(ctx); err != nil || !slices.Equal(list, []DaemonState{{ID: "claim-a", Running: false}}) {
		t.Fatalf("List = %+v, %v", list, err)
	}
	d := mustStart(t, ctx, m, spec)
	if d.Adopted || d.PID == first.PID {
		t.Fatalf("Start after a kill = %+v, want a new daemon", d)
	}
	if got, want := status(t, d.PipeDir).Commands, []string{cmdProbe, "set_default_active_thread_percentage 20"}; !slices.Equal(got, want) {
		t.Errorf("new daemon received %q, want %q", got, want)
	}
}

// A crash of the agent between the intent record and the PID: the daemon
// runs, nobody wrote its PID down. A new manager finds it by its
// environment, and can stop it or adopt it.
func TestCrashBeforePIDRecorded(t *testing.T) {
	tests := []struct {
		name    string
		corrupt bool // the record is unreadable as well
		adopt   bool // Start (adopts) rather than Stop
	}{
		{name: "stop"},
		{name: "adopt", adopt: true},
		{name: "stop, corrupt record", corrupt: true},
		{name: "adopt, corrupt record", corrupt: true, adopt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := t.TempDir()
			spec := DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}, ActiveThreadPercentage: 10}
			crashed := newManager(t, root)
			dir, pipe, logs := crashed.dir(spec.ID), pipeDir(root, spec.ID), logDir(root, spec.ID)
			for _, d := range []string{pipe, logs} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := writeRecord(dir, &record{ID: spec.ID, Devices: spec.Devices, BootID: crashed.bootID}); err != nil {
				t.Fatal(err)
			}
			h, err := crashed.run.Launch(ctx, crashed.launchOf(spec))
			if err != nil {
				t.Fatal(err)
			}
			pid, start := h.PID, h.StartTime
			if tt.corrupt {
				if err := os.WriteFile(filepath.Join(dir, recordName), []byte("{"), 0o644); err != nil {
					t.Fatal(err)
				}
			}

			m := newManager(t, root)
			if list, err := m.List(ctx); err != nil || !slices.Equal(list, []DaemonState{{ID: spec.ID, Running: true}}) {
				t.Fatalf("List = %+v, %v", list, err)
			}
			if tt.adopt {
				d := mustStart(t, ctx, m, spec)
				if !d.Adopted || d.PID != pid {
					t.Fatalf("Start = %+v, want PID %d adopted", d, pid)
				}
				if rec, err := readRecord(dir); err != nil || rec.PID != pid || rec.StartTime != start {
					t.Errorf("record after adoption %+v, %v: want the PID recorded", rec, err)
				}
				return
			}
			if err := m.Stop(ctx, spec.ID); err != nil {
				t.Fatal(err)
			}
			if alive(pid, start) {
				t.Error("daemon alive after Stop")
			}
			if dirExists(t, m, spec.ID) {
				t.Error("daemon directory left after Stop")
			}
		})
	}
}

// A daemon found with no directory at all (removed by hand) is listed and
// stopped.
func TestDaemonWithoutDirectory(t *testing.T) {
	ctx := testCtx(t)
	m := newManager(t, t.TempDir())
	d := mustStart(t, ctx, m, DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}})
	start := startTime(t, d.PID)
	if err := os.RemoveAll(filepath.Join(m.Root(), "claim-a")); err != nil {
		t.Fatal(err)
	}
	if list, err := m.List(ctx); err != nil || !slices.Equal(list, []DaemonState{{ID: "claim-a", Running: true}}) {
		t.Fatalf("List = %+v, %v", list, err)
	}
	// Its control FIFO went with the directory, so quit cannot reach it:
	// Stop kills it.
	if err := m.Stop(ctx, "claim-a"); err != nil {
		t.Fatal(err)
	}
	if alive(d.PID, start) {
		t.Error("daemon alive after Stop")
	}
}

// Records that name a process which is not the daemon: one that died, and
// live processes that the record's PID names only by reuse (another start
// time) or in another boot. None is adopted or killed.
func TestRecordOfAnotherProcess(t *testing.T) {
	tests := []struct {
		name   string
		record func(t *testing.T, m *Manager) (rec record, victim int, victimStart uint64)
	}{
		{"dead process", func(t *testing.T, m *Manager) (record, int, uint64) {
			pid, start := exited(t)
			return record{Handle: Handle{PID: pid, StartTime: start}, BootID: m.bootID}, 0, 0
		}},
		{"reused PID, other start time", func(t *testing.T, m *Manager) (record, int, uint64) {
			pid, start := sleeper(t)
			return record{Handle: Handle{PID: pid, StartTime: start + 1}, BootID: m.bootID}, pid, start
		}},
		{"other boot", func(t *testing.T, m *Manager) (record, int, uint64) {
			pid, start := sleeper(t)
			return record{Handle: Handle{PID: pid, StartTime: start}, BootID: "another-boot"}, pid, start
		}},
	}
	for _, tt := range tests {
		for _, op := range []string{"start", "stop"} {
			t.Run(tt.name+"/"+op, func(t *testing.T) {
				ctx := testCtx(t)
				m := newManager(t, t.TempDir())
				spec := DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}}
				rec, victim, victimStart := tt.record(t, m)
				rec.ID, rec.Devices = spec.ID, spec.Devices
				if err := os.MkdirAll(m.dir(spec.ID), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := writeRecord(m.dir(spec.ID), &rec); err != nil {
					t.Fatal(err)
				}
				if list, err := m.List(ctx); err != nil || !slices.Equal(list, []DaemonState{{ID: spec.ID, Running: false}}) {
					t.Fatalf("List = %+v, %v", list, err)
				}
				switch op {
				case "start":
					d := mustStart(t, ctx, m, spec)
					if d.Adopted || d.PID == rec.PID {
						t.Errorf("Start = %+v: took PID %d for the daemon", d, rec.PID)
					}
				case "stop":
					if err := m.Stop(ctx, spec.ID); err != nil {
						t.Fatal(err)
					}
					if dirExists(t, m, spec.ID) {
						t.Error("stale directory left after Stop")
					}
				}
				if victim != 0 && !alive(victim, victimStart) {
					t.Errorf("%s killed PID %d, which is no daemon", op, victim)
				}
			})
		}
	}
}

func TestStartReplacesDaemonOfOtherDevices(t *testing.T) {
	ctx := testCtx(t)
	m := newManager(t, t.TempDir())
	first := mustStart(t, ctx, m, DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a", "GPU-b"}})
	start := startTime(t, first.PID)
	for _, devices := range [][]string{{"GPU-b", "GPU-a"}, {"GPU-c"}} {
		d := mustStart(t, ctx, m, DaemonSpec{ID: "claim-a", Devices: devices})
		if d.Adopted || d.PID == first.PID {
			t.Fatalf("Start with devices %v = %+v, want a new daemon", devices, d)
		}
		if got := status(t, d.PipeDir).Devices; !slices.Equal(got, devices) {
			t.Errorf("new daemon serves %v, want %v", got, devices)
		}
	}
	if alive(first.PID, start) {
		t.Error("the replaced daemon still runs")
	}
}

func TestStopWhatDoesNotExist(t *testing.T) {
	ctx := testCtx(t)
	m := newManager(t, filepath.Join(t.TempDir(), "not-yet"))
	if err := m.Stop(ctx, "claim-x"); err != nil {
		t.Errorf("Stop of an unknown id: %v", err)
	}
	if list, err := m.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List without a root = %+v, %v", list, err)
	}
	if err := m.Stop(ctx, "../etc"); err == nil {
		t.Error("Stop accepted an id that is a path")
	}
}

func TestList(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	m := newManager(t, root)
	for _, id := range []string{"c", "a", "b"} {
		mustStart(t, ctx, m, DaemonSpec{ID: id, Devices: []string{"GPU-" + id}})
	}
	b, _ := readRecord(m.dir("b"))
	if err := syscall.Kill(b.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, b.PID, b.StartTime)
	// Another manager's daemon, under another root, is not listed.
	mustStart(t, ctx, newManager(t, t.TempDir()), DaemonSpec{ID: "a", Devices: []string{"GPU-z"}})
	// Nor is what is not a daemon directory.
	if err := os.WriteFile(filepath.Join(root, "stray-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := []DaemonState{{ID: "a", Running: true}, {ID: "b", Running: false}, {ID: "c", Running: true}}
	if list, err := m.List(ctx); err != nil || !slices.Equal(list, want) {
		t.Errorf("List = %+v, %v; want %+v", list, err, want)
	}
}

func TestStartRefusesBadSpecs(t *testing.T) {
	tests := []struct {
		name string
		spec DaemonSpec
		want string
	}{
		{"no id", DaemonSpec{Devices: []string{"GPU-a"}}, "not valid"},
		{"id is a path", DaemonSpec{ID: "a/b", Devices: []string{"GPU-a"}}, "not valid"},
		{"id is ..", DaemonSpec{ID: "..", Devices: []string{"GPU-a"}}, "not valid"},
		{"no devices", DaemonSpec{ID: "a"}, "no devices"},
		{"empty device", DaemonSpec{ID: "a", Devices: []string{""}}, "not a UUID"},
		{"device with a comma", DaemonSpec{ID: "a", Devices: []string{"GPU-a,GPU-b"}}, "not a UUID"},
		{"device twice", DaemonSpec{ID: "a", Devices: []string{"GPU-a", "GPU-a"}}, "twice"},
		{"percentage over 100", DaemonSpec{ID: "a", Devices: []string{"GPU-a"}, ActiveThreadPercentage: 101}, "1-100"},
		{"negative percentage", DaemonSpec{ID: "a", Devices: []string{"GPU-a"}, ActiveThreadPercentage: -1}, "1-100"},
		{"limit for another device", DaemonSpec{ID: "a", Devices: []string{"GPU-a"}, PinnedMemoryLimits: map[string]int64{"GPU-b": 1 << 30}}, "not one of"},
		{"limit under 1 MiB", DaemonSpec{ID: "a", Devices: []string{"GPU-a"}, PinnedMemoryLimits: map[string]int64{"GPU-a": 1<<20 - 1}}, "under 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			m := newManager(t, root)
			_, err := m.Start(testCtx(t), tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start: %v, want an error with %q", err, tt.want)
			}
			if _, err := os.Lstat(root); !os.IsNotExist(err) {
				t.Errorf("a refused Start made the root: %v", err)
			}
		})
	}
}

// A daemon that cannot start leaves nothing behind, and the error says why;
// one that exits at once fails Start at once, not after the timeout.
func TestStartFailures(t *testing.T) {
	tests := []struct {
		name    string
		control func(t *testing.T) []string
		want    []string
	}{
		{"no such program", func(t *testing.T) []string { return []string{filepath.Join(t.TempDir(), "nvidia-cuda-mps-control")} },
			[]string{"launch", "no such file"}},
		{"daemon exits at once", func(t *testing.T) []string { return []string{testBinary(t), "mps-control", "-bad-flag"} },
			[]string{"exited before it accepted commands", "unsupported arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(Config{Root: t.TempDir(), Control: tt.control(t)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Start(testCtx(t), DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}})
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Start: %v, want an error with %q", err, w)
				}
			}
			if err != nil && !strings.Contains(err.Error(), "claim-a") {
				t.Errorf("error does not name the daemon: %v", err)
			}
			if dirExists(t, m, "claim-a") {
				t.Error("a failed Start left the daemon directory")
			}
			if procs, err := scan(m.Root()); err != nil || len(procs) != 0 {
				t.Errorf("a failed Start left processes: %+v, %v", procs, err)
			}
		})
	}
}

// Concurrent Starts of one id make one daemon; the others adopt it.
func TestConcurrentStarts(t *testing.T) {
	ctx := testCtx(t)
	m := newManager(t, t.TempDir())
	spec := DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a"}}
	var wg sync.WaitGroup
	results := make([]*Daemon, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = m.Start(ctx, spec) })
	}
	wg.Wait()
	started := 0
	for i, d := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !d.Adopted {
			started++
		}
		if d.PID != results[0].PID {
			t.Errorf("Start %d got PID %d, Start 0 got %d", i, d.PID, results[0].PID)
		}
	}
	if started != 1 {
		t.Errorf("%d Starts launched a daemon, want 1", started)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []Config{{Root: "/x"}, {Root: "/x", Control: []string{""}}, {Control: []string{"nvidia-cuda-mps-control"}}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	m, err := New(Config{Root: "relative", Control: []string{"x"}})
	if err != nil || !filepath.IsAbs(m.Root()) {
		t.Errorf("New with a relative root: %v, root %q", err, m.Root())
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		stat string
		want procStat
		bad  bool
	}{
		{name: "plain", stat: "42 (nvidia-cuda-mp) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 100",
			want: procStat{state: 'S', session: 42, start: 123456}},
		{name: "name with spaces and parentheses", stat: "7 (a) b (c) Z 1 7 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0",
			want: procStat{state: 'Z', session: 9, start: 99}},
		{name: "truncated", stat: "7 (a) S 1 7 9", bad: true},
		{name: "no name", stat: "7 a S 1", bad: true},
		{name: "start not a number", stat: "7 (a) S 1 7 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 x", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.stat))
			if tt.bad {
				if err == nil {
					t.Errorf("parsed %+v", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// parentPID is field 4 of /proc/<pid>/stat.
func parentPID(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
