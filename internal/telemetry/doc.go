// Package telemetry is the one schema of a device's live readings (memory,
// utilization, temperature, power, clock) that every backend reports, and
// the poller that reads them on an interval of its own.
//
// A backend that can read telemetry implements backend.TelemetryReader.
// The Poller (internal/poll) calls it every Interval and keeps the latest readings behind
// an atomic pointer, so a Prometheus scrape reads memory only: it never
// waits on NVML or sysfs, and a slow or hung GPU costs the scrape nothing.
package telemetry
