package standin

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A daemon that goes while a request waits for its answer: Send says so
// at once, as the client of a dead daemon must not wait out its context.
func TestSendDaemonGone(t *testing.T) {
	tests := []struct {
		name string
		// gone ends the "daemon": ctl is its FIFO, r its reading end.
		gone func(t *testing.T, ctl string, r *os.File)
	}{
		{name: "killed", gone: func(t *testing.T, _ string, r *os.File) { r.Close() }},
		{name: "FIFO removed", gone: func(t *testing.T, ctl string, _ *os.File) { _ = os.Remove(ctl) }},
		{name: "FIFO replaced", gone: func(t *testing.T, ctl string, _ *os.File) {
			_ = os.Remove(ctl)
			if err := syscall.Mkfifo(ctl, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := os.OpenFile(ctl, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pipe := t.TempDir()
			ctl := filepath.Join(pipe, ControlFIFO)
			if err := syscall.Mkfifo(ctl, 0o600); err != nil {
				t.Fatal(err)
			}
			// A reader that reads nothing: the request is accepted, no answer comes.
			r, err := os.OpenFile(ctl, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			errc := make(chan error, 1)
			go func() {
				_, err := Send(t.Context(), pipe, "client ping --pid=1")
				errc <- err
			}()
			time.Sleep(2 * daemonCheck)
			select {
			case err := <-errc:
				t.Fatalf("Send returned before the daemon went: %v", err)
			default:
			}
			tt.gone(t, ctl, r)
			select {
			case err := <-errc:
				if !errors.Is(err, ErrNoDaemon) {
					t.Errorf("Send: %v, want ErrNoDaemon", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Send still waits for a daemon that went")
			}
		})
	}
}
