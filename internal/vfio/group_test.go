package vfio_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/vfio"
	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
)

// TestPlan: which groups can be passed, and what passing each GPU binds.
func TestPlan(t *testing.T) {
	type passage struct {
		group int
		fns   []string
	}
	cases := []struct {
		name    string
		host    func(h simfs.Host) simfs.Host
		gpus    []string
		want    []passage
		wantErr []string
		is      error
	}{
		{name: "alone under its root port", gpus: []string{h100a}, want: []passage{{17, []string{h100a}}}},
		{name: "two GPUs of two groups", gpus: []string{h100b, h100a}, want: []passage{{29, []string{h100b}}, {17, []string{h100a}}}},
		{name: "its audio function goes with it", gpus: []string{rtx}, want: []passage{{40, []string{rtx, rtxHDA}}}},
		{name: "a switch without ACS: one GPU of two", gpus: []string{l4a},
			wantErr: []string{"IOMMU group 60 is incomplete", l4b + " (class 0x030200, nvidia)", "pass the GPUs of the group together"}},
		{name: "a switch without ACS: both GPUs, the bridge stays", gpus: []string{l4a, l4b}, want: []passage{{60, []string{l4a}}, {60, []string{l4b}}}},
		{name: "a NIC in the group", gpus: []string{t4},
			wantErr: []string{"IOMMU group 80 is incomplete", nicBDF + " (class 0x020000, mlx5_core)"}},
		{name: "no IOMMU", host: func(h simfs.Host) simfs.Host { h.IOMMU = false; return h }, gpus: []string{h100a}, is: vfio.ErrNoIOMMU},
		{name: "vfio-pci not loaded", host: func(h simfs.Host) simfs.Host { h.VFIO = false; return h }, gpus: []string{h100a}, is: vfio.ErrNoVFIO},
		{name: "not a PCI address", gpus: []string{"../../etc"}, wantErr: []string{"is not DDDD:BB:DD.F"}},
		{name: "no such device", gpus: []string{"0000:99:00.0"}, wantErr: []string{"sys/bus/pci/devices/0000:99:00.0: file does not exist"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := testHost()
			if tc.host != nil {
				h = tc.host(h)
			}
			tr, _ := tree(t, h)
			got, err := vfio.Plan(tr, tc.gpus)
			if tc.is != nil || len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Plan = %+v, want an error", got)
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Errorf("error %v, want %v", err, tc.is)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var have []passage
			for _, p := range got {
				var fns []string
				for _, f := range p.Functions {
					fns = append(fns, f.Address)
				}
				have = append(have, passage{p.Group, fns})
			}
			if !reflect.DeepEqual(have, tc.want) {
				t.Errorf("Plan = %+v, want %+v", have, tc.want)
			}
		})
	}
}

// TestReadFunction reads what the host boots with.
func TestReadFunction(t *testing.T) {
	tr, _ := tree(t, testHost())
	got, err := vfio.ReadFunction(tr, rtxHDA)
	if err != nil {
		t.Fatal(err)
	}
	want := vfio.Function{Address: rtxHDA, Class: 0x040300, Vendor: "0x10de", Driver: "snd_hda_intel"}
	if got != want {
		t.Errorf("ReadFunction = %+v, want %+v", got, want)
	}
	if got.Bridge() || got.Display() {
		t.Errorf("an audio function is neither a bridge nor a display")
	}
	all, err := vfio.List(tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(testHost().Functions) || all[0].Address != "0000:16:01.0" || !all[0].Bridge() {
		t.Errorf("List = %+v, want every function in address order, the root port first", all)
	}
}
