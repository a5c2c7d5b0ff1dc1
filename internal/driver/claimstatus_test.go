package driver

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/names"
)

// A failed prepare is written on the claim's devices, where `kubectl
// describe resourceclaim` shows it, and cleared by the next success.
func TestPrepareOutcomeInClaimStatus(t *testing.T) {
	n := newNode(t, "mi300x-8")
	claim := n.addConfiguredClaim("mps", `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`, "gpu-0")
	resp := n.prepare(claim)
	if e := resp.Claims[claim.Uid].GetError(); !strings.Contains(e, "MPS is not supported on AMD GPUs") {
		t.Fatalf("prepare error %q", e)
	}
	cond := func() (status metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		c, err := n.client.ResourceV1().ResourceClaims("default").Get(n.ctx, "mps", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Status.Devices) != 1 || c.Status.Devices[0].Device != "gpu-0" || c.Status.Devices[0].Driver != names.DriverName || len(c.Status.Devices[0].Conditions) != 1 {
			t.Fatalf("device status %+v", c.Status.Devices)
		}
		k := c.Status.Devices[0].Conditions[0]
		if k.Type != names.ConditionPrepared {
			t.Fatalf("condition %+v", k)
		}
		return k.Status, k.Reason, k.Message
	}
	if s, r, m := cond(); s != metav1.ConditionFalse || r != "ConfigRejected" || !strings.Contains(m, "sharing.strategy (from claim): MPS is not supported on AMD GPUs") {
		t.Errorf("after the failure: %s %s %q", s, r, m)
	}

	// The user drops the bad config; the kubelet's retry succeeds.
	c, err := n.client.ResourceV1().ResourceClaims("default").Get(n.ctx, "mps", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation.Devices.Config = nil
	if _, err := n.client.ResourceV1().ResourceClaims("default").UpdateStatus(n.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := n.prepare(claim).Claims[claim.Uid].GetError(); e != "" {
		t.Fatalf("retry: %s", e)
	}
	if s, r, _ := cond(); s != metav1.ConditionTrue || r != ReasonPrepared {
		t.Errorf("after the success: %s %s", s, r)
	}
}

func TestConditionReason(t *testing.T) {
	for in, want := range map[string]string{"config_rejected": "ConfigRejected", "device_in_use": "DeviceInUse", "other": "Other", "": "PrepareFailed"} {
		if got := conditionReason(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
