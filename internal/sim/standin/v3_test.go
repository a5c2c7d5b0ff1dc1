package standin

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const v3Config = `schema_version = "1.0"
[servers.gpu0]
allowed_devices = "GPU-a"
pinned_memory_limit = "8G"
active_thread_percentage = "80"
[servers.gpu0.namespaces.conf]
pinned_memory_limit = "1024M"
[servers.gpu1]
`

// runV3 starts a protocol 3 daemon in this process with the configuration
// text and returns it with its Run's result.
func runV3(t *testing.T, config string, now func() time.Time) (*Daemon, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	d := &Daemon{
		PipeDir: filepath.Join(dir, "pipe"), LogDir: filepath.Join(dir, "log"), Devices: []string{"GPU-a", "GPU-b"},
		Protocol: 3, ConfigFile: writeConfig(t, config), Now: now,
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(t.Context()) }()
	waitReady(t, d.PipeDir, done)
	return d, done
}

func TestV3Sockets(t *testing.T) {
	d, done := runV3(t, v3Config, nil)
	pipe := d.PipeDir
	want := []string{"control", "gpu0/conf/control", "gpu0/control", "gpu0/default/control", "gpu1/control", "gpu1/default/control"}
	if got := fifos(t, pipe); !slices.Equal(got, want) {
		t.Fatalf("FIFOs %q, want %q", got, want)
	}
	for _, p := range []string{"gpu0", "gpu0/conf", "gpu0/default"} {
		if fi, err := os.Stat(filepath.Join(pipe, p)); err != nil || fi.Mode().Perm() != 0o755 || !fi.IsDir() {
			t.Errorf("%s: %v, %v; want a 0755 directory", p, fi.Mode(), err)
		}
	}
	for _, p := range want {
		if fi, err := os.Stat(filepath.Join(pipe, p)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", p, fi.Mode(), err)
		}
	}
	// Each namespace socket serves a client session of its own namespace.
	for _, dir := range []string{"gpu0/conf", "gpu0", "gpu1/default"} {
		if _, err := Send(t.Context(), filepath.Join(pipe, dir), "client connect --pid=7"); err != nil {
			t.Errorf("connect on %s: %v", dir, err)
		}
	}
	out, err := Send(t.Context(), pipe, "client list --all")
	if want := "7 gpu0/conf\n7 gpu0/default\n7 gpu1/default"; err != nil || out != want {
		t.Errorf("client list: %q, %v; want %q", out, err, want)
	}
	st, err := ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	wantServers := map[string]ServerStatus{
		"gpu0": {AllowedDevices: []string{"GPU-a"}, Limits: Limits{PinnedMemoryLimit: "8G", ActiveThreadPercentage: 80}, Namespaces: map[string]Limits{"conf": {PinnedMemoryLimit: "1024M"}}},
		"gpu1": {Namespaces: map[string]Limits{}},
	}
	if st.Protocol != 3 || !reflect.DeepEqual(st.Servers, wantServers) || len(st.Clients) != 3 || st.Clients[0].Server != "gpu0" || st.Clients[0].Namespace != "conf" {
		t.Errorf("status %+v", st)
	}

	if _, err := Send(t.Context(), pipe, "quit"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := fifos(t, pipe); len(got) != 0 {
		t.Errorf("FIFOs left after quit: %q", got)
	}
	if _, err := Send(t.Context(), filepath.Join(pipe, "gpu0", "conf"), "client ping --pid=7"); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("ping after quit: %v, want ErrNoDaemon", err)
	}
}

func TestV3Commands(t *testing.T) {
	d, _ := runV3(t, v3Config, nil)
	pipe := d.PipeDir
	tests := []struct {
		cmd     string
		want    string
		wantErr string
	}{
		{cmd: "server list", want: "gpu0\ngpu1"},
		{cmd: "get_server_list"},
		{cmd: "namespace list --server=gpu0", want: "conf\ndefault"},
		{cmd: "namespace list --server=gpu1", want: "default"},
		{cmd: "namespace get --server=gpu0 --name=conf", want: "pinned_memory_limit=1024M active_thread_percentage=100"},
		{cmd: "namespace get --server=gpu0 --name=default", want: "pinned_memory_limit=8G active_thread_percentage=80"},
		{cmd: "namespace get --server=gpu1 --name=default", want: "pinned_memory_limit=0M active_thread_percentage=100"},
		{cmd: "namespace create --server=gpu0 --name=t1 --pinned-memory-limit=2G --active-thread-percentage=25"},
		{cmd: "namespace create --server=gpu0 --name=t1 --pinned-memory-limit=2048M --active-thread-percentage=25"},
		{cmd: "namespace create --server=gpu0 --name=t1 --pinned-memory-limit=1G --active-thread-percentage=25", wantErr: "exists with pinned_memory_limit=2G active_thread_percentage=25, not pinned_memory_limit=1G"},
		{cmd: "namespace create --server=gpu0 --name=t1", wantErr: "exists with"},
		{cmd: "namespace get --server=gpu0 --name=t1", want: "pinned_memory_limit=2G active_thread_percentage=25"},
		{cmd: "namespace create --server=gpu0 --name=t2"},
		{cmd: "namespace get --server=gpu0 --name=t2", want: "pinned_memory_limit=0M active_thread_percentage=100"},
		{cmd: "namespace list --server=gpu0", want: "conf\ndefault\nt1\nt2"},
		{cmd: "namespace create --server=gpu0 --name=default", wantErr: "always exists"},
		{cmd: "namespace create --server=gpu0 --name=../x", wantErr: "namespace name"},
		{cmd: "namespace create --server=gpu9 --name=t3", wantErr: `no server "gpu9"`},
		{cmd: "namespace create --server=gpu0", wantErr: "--name=<value> is required"},
		{cmd: "namespace create --server=gpu0 --name=t3 --pinned-memory-limit=2", wantErr: "followed by M or G"},
		{cmd: "namespace create --server=gpu0 --name=t3 --active-thread-percentage=0", wantErr: "from 1 to 100"},
		{cmd: "namespace create --server=gpu0 --name=t3 --uid=0", wantErr: `unknown argument "--uid=0"`},
		{cmd: "namespace create --server=gpu0 --name=t3 --name=t4", wantErr: "given twice"},
		{cmd: "namespace get --server=gpu0 --name=t3", wantErr: `no namespace "t3"`},
		{cmd: "namespace delete --server=gpu0 --name=t2"},
		{cmd: "namespace delete --server=gpu0 --name=t2"},
		{cmd: "namespace delete --server=gpu0 --name=never"},
		{cmd: "namespace delete --server=gpu0 --name=default", wantErr: "never deleted"},
		{cmd: "namespace delete --server=gpu9 --name=t1", wantErr: `no server "gpu9"`},
		{cmd: "namespace list --server=gpu0", want: "conf\ndefault\nt1"},
		{cmd: "namespace rename --server=gpu0", wantErr: "unknown command"},
		{cmd: "namespace", wantErr: "needs a verb"},
		{cmd: "client list", wantErr: "--all is required"},
		{cmd: "client list --all"},
		{cmd: "set_default_active_thread_percentage 25", wantErr: "this daemon runs protocol 3"},
		{cmd: "get_default_device_pinned_mem_limit GPU-a", wantErr: "this daemon runs protocol 3"},
		{cmd: "start_server -uid 0", wantErr: "unknown command"},
		{cmd: "quit now", wantErr: "takes 0 argument"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			got, err := Send(t.Context(), pipe, tt.cmd)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	want := []string{"control", "gpu0/conf/control", "gpu0/control", "gpu0/default/control", "gpu0/t1/control", "gpu1/control", "gpu1/default/control"}
	if got := fifos(t, pipe); !slices.Equal(got, want) {
		t.Errorf("FIFOs %q, want %q", got, want)
	}
	if _, err := os.Lstat(filepath.Join(pipe, "gpu0", "t2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("deleted namespace's directory: %v", err)
	}
	st, err := ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Servers["gpu0"].Namespaces; !reflect.DeepEqual(got, map[string]Limits{"conf": {PinnedMemoryLimit: "1024M"}, "t1": {PinnedMemoryLimit: "2G", ActiveThreadPercentage: 25}}) {
		t.Errorf("gpu0's namespaces in the status: %+v", got)
	}
}

// A tenant holds only its namespace's socket: no admin command works
// there, so it can neither stop nor reconfigure the daemon.
func TestNamespaceSocketRefusesAdmin(t *testing.T) {
	d, done := runV3(t, v3Config, nil)
	pipe := d.PipeDir
	if _, err := Send(t.Context(), pipe, "namespace create --server=gpu0 --name=tenant"); err != nil {
		t.Fatal(err)
	}
	for _, sock := range []string{"gpu0/tenant", "gpu0/default", "gpu0"} {
		for _, cmd := range []string{
			"quit", "get_server_list", "server list", "namespace list --server=gpu0",
			"namespace create --server=gpu0 --name=mine", "namespace delete --server=gpu0 --name=conf",
			"client list --all", "set_default_active_thread_percentage 10",
		} {
			t.Run(sock+"/"+cmd, func(t *testing.T) {
				_, err := Send(t.Context(), filepath.Join(pipe, sock), cmd)
				if err == nil || !strings.Contains(err.Error(), "not allowed on a namespace socket") {
					t.Fatalf("%q on %s: %v, want it not allowed", cmd, sock, err)
				}
			})
		}
	}
	select {
	case err := <-done:
		t.Fatalf("daemon exited: %v", err)
	default:
	}
	out, err := Send(t.Context(), pipe, "namespace list --server=gpu0")
	if err != nil || out != "conf\ndefault\ntenant" {
		t.Errorf("namespaces after the tenant's attempts: %q, %v", out, err)
	}
}

func TestNamespaceDeleteDropsClients(t *testing.T) {
	d, _ := runV3(t, v3Config, nil)
	pipe := d.PipeDir
	if _, err := Send(t.Context(), pipe, "namespace create --server=gpu0 --name=t1"); err != nil {
		t.Fatal(err)
	}
	ns := filepath.Join(pipe, "gpu0", "t1")
	for _, cmd := range []string{"client connect --pid=10", "client ping --pid=10"} {
		if _, err := Send(t.Context(), ns, cmd); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Send(t.Context(), filepath.Join(pipe, "gpu0", "conf"), "client connect --pid=10"); err != nil {
		t.Fatal(err)
	}
	if _, err := Send(t.Context(), ns, "client ping --pid=11"); !errors.Is(err, ErrUnknownClient) {
		t.Errorf("ping of a PID never connected: %v, want ErrUnknownClient", err)
	}
	if _, err := Send(t.Context(), pipe, "namespace delete --server=gpu0 --name=t1"); err != nil {
		t.Fatal(err)
	}
	if out, err := Send(t.Context(), pipe, "client list --all"); err != nil || out != "10 gpu0/conf" {
		t.Errorf("clients after delete: %q, %v", out, err)
	}
	if _, err := Send(t.Context(), ns, "client ping --pid=10"); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("ping on the deleted namespace: %v, want ErrNoDaemon", err)
	}
	// Created again, it is a new namespace: the old session is gone.
	if err := os.MkdirAll(ns, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Send(t.Context(), pipe, "namespace create --server=gpu0 --name=t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := Send(t.Context(), ns, "client ping --pid=10"); !errors.Is(err, ErrUnknownClient) {
		t.Errorf("ping on the namespace created again: %v, want ErrUnknownClient", err)
	}
}

// Clients whose PID the daemon cannot look up are dropped by ping age;
// those it can, when the PID is gone.
func TestClientPruning(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	now := start
	d, _ := runV3(t, v3Config, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(by time.Duration) { mu.Lock(); now = now.Add(by); mu.Unlock() }
	pipe := d.PipeDir
	ns := filepath.Join(pipe, "gpu0", "conf")
	send := func(dir, cmd string) error {
		_, err := Send(t.Context(), dir, cmd)
		return err
	}
	// list checks the client list: the PIDs, all on gpu0/conf.
	list := func(when string, pids ...int) {
		t.Helper()
		out, err := Send(t.Context(), pipe, "client list --all")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(pids)
		var want []string
		for _, p := range pids {
			want = append(want, strconv.Itoa(p)+" gpu0/conf")
		}
		if out != strings.Join(want, "\n") {
			t.Errorf("%s: clients %q, want %q", when, out, want)
		}
	}
	// A child that has exited: its PID is in this PID namespace, and gone.
	dead := program(t, nil, "-d")
	_ = dead.Run()
	deadPID, self := dead.ProcessState.Pid(), os.Getpid()
	ownNS := pidNamespace()
	if ownNS == "" {
		t.Fatal("no /proc/self/ns/pid")
	}
	for _, cmd := range []string{
		"client connect --pid=5 --pid-ns=1", // another PID namespace
		"client connect --pid=6 --pid-ns=1", // another, and it pings
		"client connect --pid=6",            // a PID namespace not told: another session
		"client connect --pid=" + strconv.Itoa(self) + " --pid-ns=" + ownNS,
		"client connect --pid=" + strconv.Itoa(deadPID) + " --pid-ns=" + ownNS,
	} {
		if err := send(ns, cmd); err != nil {
			t.Fatal(err)
		}
	}
	list("after connect", 5, 6, 6, self)
	advance(20 * time.Second)
	if err := send(ns, "client ping --pid=6 --pid-ns=1"); err != nil {
		t.Fatal(err)
	}
	advance(PingTimeout - 20*time.Second)
	list("at the ping timeout", 5, 6, 6, self)
	advance(time.Second)
	list("past the ping timeout", 6, self)
	if err := send(ns, "client ping --pid=5 --pid-ns=1"); !errors.Is(err, ErrUnknownClient) {
		t.Errorf("ping of a dropped client: %v, want ErrUnknownClient", err)
	}
	// This process's session has no ping either; its /proc entry is what
	// keeps it.
	advance(time.Hour)
	list("an hour on", self)
	st, err := ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	want := []ClientStatus{{PID: self, PIDNamespace: ownNS, Server: "gpu0", Namespace: "conf", Since: start}}
	if !reflect.DeepEqual(st.Clients, want) {
		t.Errorf("status clients %+v, want %+v", st.Clients, want)
	}
	if err := send(ns, "client disconnect --pid="+strconv.Itoa(self)+" --pid-ns="+ownNS); err != nil {
		t.Fatal(err)
	}
	list("after disconnect")
	if err := send(ns, "client disconnect --pid="+strconv.Itoa(self)+" --pid-ns="+ownNS); !errors.Is(err, ErrUnknownClient) {
		t.Errorf("second disconnect: %v, want ErrUnknownClient", err)
	}
}
