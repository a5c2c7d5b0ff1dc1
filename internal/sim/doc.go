// Package sim is Tessera's simulated backend: a backend.Backend that behaves
// like a node full of real GPUs without any hardware.
//
// A machine file (YAML, see README.md) describes one node: GPU types with
// their partition profile tables, the GPUs themselves and their
// interconnects. LoadMachine and Profile turn a machine file into a Machine;
// New turns a Machine into a Backend that keeps real partition state across
// process restarts (like hardware across a driver restart), forgets it when
// the host's boot id changes (like a reboot), and lays out a private /dev
// tree with the device nodes the imitated hardware would have.
//
// The built-in catalogue (CatalogNames) holds machines modelled on real
// systems; every figure in it carries its public source in a YAML comment.
package sim
