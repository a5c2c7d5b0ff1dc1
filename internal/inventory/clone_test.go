package inventory

import (
	"reflect"
	"testing"
)

func TestCloneIsDeep(t *testing.T) {
	orig := &Node{
		GPUs: []GPU{{
			UUID:    "GPU-0",
			Engines: map[string]int64{"decoders": 7},
			Partitioning: &Partitioning{Kind: PartitionMIG, Profiles: []PartitionProfile{{
				Name: "1g.10gb", Engines: map[string]int64{"ofa": 0}, Placements: []Placement{{Start: 0, Size: 1}},
			}}},
			Partitions: []Partition{{UUID: "MIG-0", Engines: map[string]int64{"decoders": 1}}},
		}},
		Links: []Link{{Kind: LinkNVLink, A: 0, B: 0}},
	}
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("clone differs: %+v", c)
	}
	g := &c.GPUs[0]
	g.UUID = "changed"
	g.Engines["decoders"] = 0
	g.Partitioning.Kind = PartitionXCP
	g.Partitioning.Profiles[0].Engines["ofa"] = 1
	g.Partitioning.Profiles[0].Placements[0].Start = 5
	g.Partitions[0].Engines["decoders"] = 9
	c.Links[0].Kind = LinkPCIe
	o := orig.GPUs[0]
	if o.UUID != "GPU-0" || o.Engines["decoders"] != 7 || o.Partitioning.Kind != PartitionMIG ||
		o.Partitioning.Profiles[0].Engines["ofa"] != 0 || o.Partitioning.Profiles[0].Placements[0].Start != 0 ||
		o.Partitions[0].Engines["decoders"] != 1 || orig.Links[0].Kind != LinkNVLink {
		t.Errorf("changing the clone changed the original: %+v %+v", o, orig.Links)
	}
}
