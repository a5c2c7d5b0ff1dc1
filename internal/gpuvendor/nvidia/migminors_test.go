package nvidia

import "testing"

func TestMIGCapMinors(t *testing.T) {
	tests := []struct {
		gpu, gi, ci    int
		wantGI, wantCI int
		wantErr        bool
	}{
		// Lines of a real /proc/driver/nvidia-caps/mig-minors.
		{gpu: 0, gi: 0, ci: 0, wantGI: 3, wantCI: 4},
		{gpu: 0, gi: 1, ci: 0, wantGI: 12, wantCI: 13},
		{gpu: 0, gi: 14, ci: 7, wantGI: 129, wantCI: 137},
		{gpu: 1, gi: 0, ci: 0, wantGI: 138, wantCI: 139},
		{gpu: 7, gi: 2, ci: 3, wantGI: 3 + 7*135 + 18, wantCI: 3 + 7*135 + 18 + 4},
		{gpu: 0, gi: 15, wantErr: true},
		{gpu: 0, gi: -1, wantErr: true},
		{gpu: 0, gi: 0, ci: 8, wantErr: true},
	}
	for _, tt := range tests {
		gi, ci, err := MIGCapMinors(tt.gpu, tt.gi, tt.ci)
		if (err != nil) != tt.wantErr {
			t.Errorf("MIGCapMinors(%d,%d,%d) err = %v, wantErr %v", tt.gpu, tt.gi, tt.ci, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && (gi != tt.wantGI || ci != tt.wantCI) {
			t.Errorf("MIGCapMinors(%d,%d,%d) = %d,%d want %d,%d", tt.gpu, tt.gi, tt.ci, gi, ci, tt.wantGI, tt.wantCI)
		}
	}
}

func TestMIGCapMinorsUserGuide(t *testing.T) {
	// /proc/driver/nvidia-caps/mig-minors as the MIG user guide prints it.
	for _, c := range []struct{ gpu, gi, ci, wantGI, wantCI int }{
		{0, 0, 0, 3, 4}, {0, 0, 2, 3, 6}, {3, 3, 3, 435, 439}, {6, 11, 7, 912, 920}, {31, 14, 7, 4314, 4322},
	} {
		gi, ci, err := MIGCapMinors(c.gpu, c.gi, c.ci)
		if err != nil || gi != c.wantGI || ci != c.wantCI {
			t.Errorf("gpu%d/gi%d/ci%d: %d %d %v, want %d %d", c.gpu, c.gi, c.ci, gi, ci, err, c.wantGI, c.wantCI)
		}
	}
}
