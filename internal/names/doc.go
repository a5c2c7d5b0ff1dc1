// Package names holds the names Tessera's parts share with each other and
// with users: the driver name, the condition a failed prepare writes, the
// partitioning modes, the DeviceClasses, and how devices are named. It is a
// leaf (the standard library only), so every package can import it and no
// name is spelled twice.
package names
