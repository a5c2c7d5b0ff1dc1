package host

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBootID(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content *string // nil: file missing
		want    string
		wantErr bool
	}{
		{name: "trimmed", content: ptr("0f7c3b6e-1a2b-4c3d-8e9f-0a1b2c3d4e5f\n"), want: "0f7c3b6e-1a2b-4c3d-8e9f-0a1b2c3d4e5f"},
		{name: "empty", content: ptr("\n"), wantErr: true},
		{name: "missing", wantErr: true},
	}
	defer func(p string) { bootIDPath = p }(bootIDPath)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bootIDPath = filepath.Join(dir, tt.name)
			if tt.content != nil {
				if err := os.WriteFile(bootIDPath, []byte(*tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := BootID()
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("BootID() = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// On Linux the real file exists and holds a UUID.
func TestBootIDReal(t *testing.T) {
	id, err := BootID()
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 36 {
		t.Errorf("boot ID %q is not a UUID", id)
	}
}

func ptr(s string) *string { return &s }
