// Package poll keeps the last answer of a source the agent reads on its
// own interval, never on a scrape: device telemetry, the kubelet's
// PodResources. A failed read leaves the last answer in place for a few
// polls (a driver or kubelet busy for a moment) and then drops it, so the
// agent never goes on exporting what it can no longer read.
package poll
