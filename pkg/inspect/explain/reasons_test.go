package explain

import "testing"

// alternativesReason consumes the firstAvailable alternatives of one
// request and says where the next request starts; it always moves on.
func TestAlternativesReasonAdvances(t *testing.T) {
	tests := []struct {
		name   string
		reqs   []RequestReport
		i      int
		next   int
		reason bool
	}{
		{
			name: "two alternatives, neither enough",
			reqs: []RequestReport{
				{Claim: "c", Request: "gpu/h100", Alternative: 1, Problem: "no such class"},
				{Claim: "c", Request: "gpu/a100", Alternative: 2, Problem: "no such class"},
				{Claim: "c", Request: "other"},
			},
			next: 2, reason: true,
		},
		{
			name: "one enough",
			reqs: []RequestReport{
				{Claim: "c", Request: "gpu/h100", Alternative: 1, Problem: "no such class"},
				{Claim: "c", Request: "gpu/a100", Alternative: 2, Enough: true},
			},
			next: 2,
		},
		{
			name: "a name without its parent's prefix",
			reqs: []RequestReport{
				{Claim: "c", Request: "odd", Alternative: 1, Problem: "no such class"},
				{Claim: "c", Request: "gpu/a100", Alternative: 2, Problem: "no such class"},
			},
			next: 1, reason: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, next := alternativesReason(tt.reqs, tt.i)
			if next != tt.next {
				t.Errorf("next = %d, want %d", next, tt.next)
			}
			if (reason != "") != tt.reason {
				t.Errorf("reason %q, want one: %v", reason, tt.reason)
			}
		})
	}
}
