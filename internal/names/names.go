package names

// DriverName is the DRA driver name and the attribute domain of every
// device Tessera publishes.
const DriverName = "gpu.tessera.dev"

// ConditionPrepared is the condition type the agent writes on a claim's
// devices (status.devices[].conditions): False with the reason when a
// prepare failed, True again after the next success.
const ConditionPrepared = "Prepared"

// The partitioning modes of a node (the agent's --partitioning) and, for
// tools, of a GPU as published.
const (
	// PartitioningNone: a GPU published whole only.
	PartitioningNone = "none"
	// PartitioningStatic: the partitions that exist, cut by an operator.
	PartitioningStatic = "static"
	// PartitioningDynamic: every placement with shared counters; the agent
	// carves the allocated one at prepare.
	PartitioningDynamic = "dynamic"
)

// NodeLabelFabricDomain is the node label the agent sets to its GPUs'
// multi-node NVLink domain (the fabricDomain attribute they all carry), so
// that a pod group's workers can be kept inside one domain; absent where
// the node's GPUs have none, or name more than one.
const NodeLabelFabricDomain = DriverName + "/fabric-domain"

// NodeAnnotationIMEXAddress is the node annotation an agent that runs its
// node's IMEX daemon sets to the address its IMEX peers reach it at
// (--imex-address), where that is not the node's InternalIP.
const NodeAnnotationIMEXAddress = DriverName + "/imex-address"

// VFIOClass is the DeviceClass of whole GPUs passed through to virtual
// machines: a device allocated through it is bound to vfio-pci at
// prepare (docs/vfio.md).
const VFIOClass = "vfio." + DriverName

// DeviceClasses are the DeviceClasses the chart ships
// (internal/deviceclasses), the first the class of any whole GPU.
var DeviceClasses = []string{
	DriverName,
	"nvidia." + DriverName,
	"amd." + DriverName,
	"mig." + DriverName,
	"xcp." + DriverName,
	"imex." + DriverName,
	VFIOClass,
}

// ForwardedAuthorizationHeader carries a caller's "Bearer <token>" to an
// agent's metrics port where a proxy in between consumes Authorization: the
// API server's pods/proxy authenticates the caller with it and strips it,
// so `kubectl tessera top` sends its caller's token here too, and the agent
// (internal/metrics/auth) reviews a token from either.
const ForwardedAuthorizationHeader = "X-Forwarded-Authorization"
