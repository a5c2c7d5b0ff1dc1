package agents

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestMetricsPort: the port kubectl tessera reaches an agent pod on, from
// what the chart renders: a named port, else (host network with surge
// upgrades: no declared port) the agent's --metrics-address, else a
// declared default port; none where metrics are off.
func TestMetricsPort(t *testing.T) {
	env := func(v string) []corev1.EnvVar { return []corev1.EnvVar{{Name: "TESSERA_METRICS_ADDRESS", Value: v}} }
	for _, tc := range []struct {
		name string
		ctr  corev1.Container
		want string
		ok   bool
	}{
		{"named port", corev1.Container{Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}, Env: env(":9478")}, "9100", true},
		{"host network, surge: the address", corev1.Container{Env: env(":29039")}, "29039", true},
		{"an address with a host", corev1.Container{Env: env("127.0.0.1:9500")}, "9500", true},
		{"metrics off", corev1.Container{Env: env("")}, "", false},
		{"port 0", corev1.Container{Env: env(":0")}, "", false},
		{"the default port declared", corev1.Container{Ports: []corev1.ContainerPort{{ContainerPort: DefaultMetricsPort}}}, "9478", true},
		{"nothing", corev1.Container{}, "", false},
	} {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{tc.ctr}}}
		got, ok := MetricsPort(p)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %q %v, want %q %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
