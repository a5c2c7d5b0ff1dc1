package agents

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, path, want string }{
		{"http://127.0.0.1:40001/metrics", "/readyz", "http://127.0.0.1:40001/readyz"},
		{"http://127.0.0.1:40001/metrics/", "/readyz", "http://127.0.0.1:40001/readyz"},
		{"http://127.0.0.1:40001", "/readyz", "http://127.0.0.1:40001/readyz"},
		{"127.0.0.1:40001", "/metrics", "http://127.0.0.1:40001/metrics"},
		{"https://n1:9478/readyz", "/readyz", "https://n1:9478/readyz"},
		{"https://n1:9478/readyz", "/metrics", "https://n1:9478/metrics"},
		{"http://proxy/agents/n1/metrics?x=1", "/readyz", "http://proxy/agents/n1/readyz"},
	} {
		got, err := URL(c.in, c.path)
		if err != nil || got != c.want {
			t.Errorf("URL(%q, %q) = %q, %v; want %q", c.in, c.path, got, err, c.want)
		}
	}
	if _, err := URL("http:///metrics", "/readyz"); err == nil {
		t.Error("no error for a URL without a host")
	}
}

func TestParseURLs(t *testing.T) {
	got, err := ParseURLs([]string{"n1=http://127.0.0.1:1/metrics", "n2=127.0.0.1:2"})
	if err != nil || len(got) != 2 || got["n2"] != "127.0.0.1:2" {
		t.Fatalf("ParseURLs: %v, %v", got, err)
	}
	for _, bad := range []string{"n1", "=http://x", "n1=", "n1=http:///metrics"} {
		if _, err := ParseURLs([]string{bad}); err == nil || !strings.Contains(err.Error(), "--metrics-url") {
			t.Errorf("ParseURLs(%q): %v, want an error naming the flag", bad, err)
		}
	}
}

// Pick asks the running pod, and among several the newest (a surge
// upgrade's new agent); without a running one, the newest.
func TestPick(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, age time.Duration) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))},
			Status: corev1.PodStatus{Phase: phase}}
	}
	for _, c := range []struct {
		pods []corev1.Pod
		want string
	}{
		{nil, ""},
		{[]corev1.Pod{pod("old", corev1.PodRunning, time.Hour), pod("new", corev1.PodPending, time.Minute)}, "old"},
		{[]corev1.Pod{pod("old", corev1.PodRunning, time.Hour), pod("new", corev1.PodRunning, time.Minute)}, "new"},
		{[]corev1.Pod{pod("a", corev1.PodFailed, time.Hour), pod("b", corev1.PodPending, time.Minute)}, "b"},
	} {
		got := ""
		if p := Pick(c.pods); p != nil {
			got = p.Name
		}
		if got != c.want {
			t.Errorf("Pick(%d pods) = %q, want %q", len(c.pods), got, c.want)
		}
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.Error(w, "not ready: publishing", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("tessera_prepared_claims 3\n"))
	}))
	defer srv.Close()
	body, err := Get(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil || string(body) != "tessera_prepared_claims 3\n" {
		t.Errorf("Get /metrics: %q, %v", body, err)
	}
	_, err = Get(context.Background(), srv.Client(), srv.URL+"/readyz")
	if se, ok := err.(*StatusError); !ok || se.Code != 503 || se.Body != "not ready: publishing" {
		t.Errorf("Get /readyz: %v, want HTTP 503 with the body", err)
	}
}
