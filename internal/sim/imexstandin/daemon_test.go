package imexstandin

import (
	"errors"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/imex"
)

// TestReadyOnlyWithEveryPeer: three trays of a domain are READY only once
// all three run; one stopping makes the others NOT_READY, naming it, and
// its restart makes all READY again.
func TestReadyOnlyWithEveryPeer(t *testing.T) {
	trays := domain(t, 3)
	start(t, trays[0], "127.0.0.1")
	two := start(t, trays[1], "127.0.0.2")
	// They reach each other, and still wait for the third.
	for _, tr := range trays[:2] {
		waitStatus(t, tr, "waiting for the third", is("NOT_READY: waiting for 127.0.0.3 (2 of 3 peers connected)"))
	}
	start(t, trays[2], "127.0.0.3")
	for _, tr := range trays {
		waitStatus(t, tr, "READY", is(imex.ReadyStatus))
	}

	two.stop(t)
	if _, err := Query(t.Context(), trays[1].socket); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Query of a stopped daemon: %v, want ErrNoDaemon", err)
	}
	for _, tr := range []tray{trays[0], trays[2]} {
		waitStatus(t, tr, "waiting for the lost one", is("NOT_READY: waiting for 127.0.0.2 (2 of 3 peers connected)"))
	}
	start(t, trays[1], "127.0.0.2")
	for _, tr := range trays {
		waitStatus(t, tr, "READY again", is(imex.ReadyStatus))
	}
}

// TestDifferentNodesListRefused: a tray whose nodes list has the same
// peers in another order is refused by the others and refuses them, is
// never READY, and all say why; with the domain's list it joins.
func TestDifferentNodesListRefused(t *testing.T) {
	trays := domain(t, 3)
	one := start(t, trays[0], "127.0.0.1")
	start(t, trays[1], "127.0.0.2")
	odd := newTray(t, portOf(t, trays[0]), []string{"127.0.0.3", "127.0.0.1", "127.0.0.2"}, imex.QuorumRecovery)
	r := start(t, odd, "127.0.0.3")
	got := waitStatus(t, odd, "refused by both", func(s string) bool {
		return strings.Contains(s, "127.0.0.1 refused: nodes list differs") && strings.Contains(s, "127.0.0.2 refused: nodes list differs")
	})
	if !strings.HasPrefix(got, "NOT_READY: waiting for 127.0.0.1, 127.0.0.2 (1 of 3 peers connected; ") {
		t.Errorf("odd tray's status %q", got)
	}
	for _, tr := range trays[:2] {
		waitStatus(t, tr, "refused by the odd one", hasPrefix("NOT_READY: waiting for 127.0.0.3 (2 of 3 peers connected; 127.0.0.3 refused: nodes list differs"))
	}
	for who, log := range map[string]string{"127.0.0.1": one.log.String(), "127.0.0.3": r.log.String()} {
		if !strings.Contains(log, "Refusing IMEX peer") || !strings.Contains(log, "IMEX peer refused us") || !strings.Contains(log, "nodes list differs") {
			t.Errorf("%s logged no refusal either way:\n%s", who, log)
		}
	}
	// The list was the only fault: with the domain's, the third joins.
	r.stop(t)
	start(t, trays[2], "127.0.0.3")
	for _, tr := range trays {
		waitStatus(t, tr, "READY with one list", is(imex.ReadyStatus))
	}
}

// portOf is tr's SERVER_PORT.
func portOf(t *testing.T, tr tray) int {
	t.Helper()
	return config(t, tr).ServerPort
}

func config(t *testing.T, tr tray) imex.Config {
	t.Helper()
	d := &Daemon{ConfigFile: tr.config}
	if err := d.load(); err != nil {
		t.Fatal(err)
	}
	return d.cfg
}

// TestInjectedFault: a tray with the fault file reports it and drops its
// peers, which report it lost and refusing; cleared, all are READY again.
func TestInjectedFault(t *testing.T) {
	trays := domain(t, 3)
	for i, tr := range trays {
		start(t, tr, loopbacks(3)[i])
	}
	for _, tr := range trays {
		waitStatus(t, tr, "READY", is(imex.ReadyStatus))
	}
	if err := InjectFault(trays[1].config, "NVLink  down\n"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, trays[1], "faulted", is("NOT_READY: injected fault: NVLink down"))
	for _, tr := range []tray{trays[0], trays[2]} {
		waitStatus(t, tr, "refused by the faulted one", is("NOT_READY: waiting for 127.0.0.2 (2 of 3 peers connected; 127.0.0.2 refused: injected fault)"))
	}
	if err := ClearFault(trays[1].config); err != nil {
		t.Fatal(err)
	}
	for _, tr := range trays {
		waitStatus(t, tr, "READY after the fault", is(imex.ReadyStatus))
	}
	if err := ClearFault(trays[1].config); err != nil {
		t.Errorf("clearing no fault: %v", err)
	}
}

// TestFaultAtStart: a daemon started with the fault file is faulted at
// once, without a message.
func TestFaultAtStart(t *testing.T) {
	trays := domain(t, 1)
	if err := InjectFault(trays[0].config, ""); err != nil {
		t.Fatal(err)
	}
	start(t, trays[0], "")
	if got, err := Query(t.Context(), trays[0].socket); err != nil || got != "NOT_READY: injected fault" {
		t.Errorf("status %q, %v", got, err)
	}
}

// TestOwnAddressFirstListenable: without --address a daemon takes the
// first line of the nodes file it can listen on: the first tray
// 127.0.0.1, the second, with 127.0.0.1's port taken, 127.0.0.2.
func TestOwnAddressFirstListenable(t *testing.T) {
	trays := domain(t, 3)
	start(t, trays[0], "")
	waitStatus(t, trays[0], "the first", is("NOT_READY: waiting for 127.0.0.2, 127.0.0.3 (1 of 3 peers connected)"))
	start(t, trays[1], "")
	waitStatus(t, trays[1], "the second, linked to the first", is("NOT_READY: waiting for 127.0.0.3 (2 of 3 peers connected)"))
}

// TestQuorumNone: with IMEX_WAIT_FOR_QUORUM=NONE a tray alone is READY.
func TestQuorumNone(t *testing.T) {
	tr := newTray(t, freePort(t), loopbacks(3), imex.QuorumNone)
	start(t, tr, "127.0.0.1")
	if got, err := Query(t.Context(), tr.socket); err != nil || got != imex.ReadyStatus {
		t.Errorf("status %q, %v; want READY", got, err)
	}
}
