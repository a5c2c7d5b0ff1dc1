package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestJSONRecords(t *testing.T) {
	dir := t.TempDir()
	type rec struct {
		ID string `json:"id"`
		N  int    `json:"n"`
	}
	for _, tc := range []struct {
		name   string
		indent bool
		want   string
	}{
		{"a.json", false, `{"id":"a","n":1}`},
		{"b.json", true, "{\n  \"id\": \"a\",\n  \"n\": 1\n}"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := WriteJSON(p, rec{"a", 1}, tc.indent, 0o600); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != tc.want {
			t.Errorf("%s: %q, want %q (the bytes of records written before stay the same)", tc.name, b, tc.want)
		}
		var got rec
		if found, err := ReadJSON(p, &got); !found || err != nil || got != (rec{"a", 1}) {
			t.Errorf("%s: read %+v, %v, %v", tc.name, got, found, err)
		}
	}
	var r rec
	if found, err := ReadJSON(filepath.Join(dir, "none.json"), &r); found || err != nil {
		t.Errorf("a missing record: found %v, %v; want neither", found, err)
	}
	torn := filepath.Join(dir, "c.json")
	if err := os.WriteFile(torn, []byte(`{"id":"a",`), 0o600); err != nil {
		t.Fatal(err)
	}
	if found, err := ReadJSON(torn, &r); !found || !errors.Is(err, ErrCorrupt) {
		t.Errorf("a torn record: found %v, %v; want found and ErrCorrupt", found, err)
	}
	for _, n := range []string{".d.json.123.tmp", ".hidden.json", "e.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "f.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	names, err := ListNames(dir, ".json")
	if err != nil || !slices.Equal(names, []string{"a.json", "b.json", "c.json"}) {
		t.Errorf("ListNames = %v, %v; want the three records, no temp, hidden, other or directory", names, err)
	}
	if names, err := ListNames(filepath.Join(dir, "absent"), ".json"); names != nil || err != nil {
		t.Errorf("a missing directory lists %v, %v", names, err)
	}
}
