package nvml

import "strings"

// knownModels are the short, stable model names of the schema's `model`
// attribute (docs/design.md). NVML's product names carry vendor, brand,
// form factor and memory size in varying order ("NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-40GB", "Tesla T4"), so a name is split into tokens and
// the first token that is a known model wins. Matching whole tokens keeps
// "H100" from matching "GH100" or "A10" from matching "A100".
var knownModels = map[string]bool{
	// Blackwell
	"B200": true, "B100": true, "GB200": true, "B300": true, "GB300": true,
	// Hopper
	"H200": true, "H100": true, "H800": true, "H20": true, "GH200": true,
	// Ada
	"L40S": true, "L40": true, "L20": true, "L4": true, "L2": true,
	// Ampere
	"A100": true, "A800": true, "A40": true, "A30": true, "A16": true, "A10G": true, "A10": true, "A2": true,
	// Turing, Volta, Pascal
	"T4": true, "V100": true, "P100": true, "P40": true, "P4": true,
}

// vendorWords are leading words that are not part of a model name.
var vendorWords = map[string]bool{"NVIDIA": true, "TESLA": true, "QUADRO": true, "GEFORCE": true}

// modelFromProductName returns the short model for an NVML product name.
// Unknown products fall back to the first token after the vendor words, so
// a new GPU still gets a usable (if unvetted) model rather than none.
func modelFromProductName(name string) string {
	tokens := strings.FieldsFunc(name, func(r rune) bool { return r == ' ' || r == '-' || r == '_' })
	for _, t := range tokens {
		if knownModels[strings.ToUpper(t)] {
			return strings.ToUpper(t)
		}
	}
	for _, t := range tokens {
		if !vendorWords[strings.ToUpper(t)] {
			return t
		}
	}
	return ""
}
