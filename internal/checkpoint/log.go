package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
)

// The log, the checkpoint's path with ".log" appended, holds what the saves
// since the newest snapshot changed, one line per save, so that a save
// costs what it changed, not every claim held (Store.SaveChanges):
//
//	{"log":1,"base":7,"baseChecksum":"sha256:…"}                      the snapshot it follows
//	{"checksum":"sha256:…","sequence":8,"change":{"version":2,…}}      one save
//	{"checksum":"sha256:…","sequence":9,"change":{…}}                  the next
//
// A record's checksum covers its change (changeRecord) as the snapshot's
// covers its payload, and the sequences go on from the snapshot's one by
// one. Loading replays the records on top of the snapshot the header names
// (sequence and checksum: a log written on top of another snapshot, one a
// compaction or an older agent has replaced since, is stale and ignored),
// and stops at the first line that is not the next valid record.
//
// Lines are appended in place at the end of the last valid record, in one
// write each: a save cut short leaves a last line with no newline, a torn
// tail, which is dropped (it is that save, not done) and cut off by the
// next append. A complete line that does not verify is not what a cut-short
// save leaves: it is corruption, reported (ErrLogCorrupt).

const (
	logSuffix = ".log"
	// logFormat is the header's "log": the format of the log's lines.
	logFormat = 1
	// minLogBytes is the log's size below which it is never compacted,
	// whatever the size of the snapshot: with few claims a compaction per
	// save or two would cost more than the records.
	minLogBytes = 64 << 10
)

// ErrLogCorrupt is wrapped by Load's error when a record of the log did not
// verify: the state returned is the one before it, and the log has been
// moved aside.
var ErrLogCorrupt = errors.New("checkpoint log corrupt")

func logPath(path string) string { return path + logSuffix }

// encodeHeader is the log's first line, naming the snapshot of sequence seq
// and checksum sum.
func encodeHeader(seq uint64, sum string) []byte {
	data, _ := json.Marshal(logHeader{Log: logFormat, Base: seq, BaseChecksum: sum}) // cannot fail
	return append(data, '\n')
}

// encodeRecord is the log line of the save of ch with sequence seq. The
// claims ch deletes that state does not hold are not written.
func encodeRecord(ch *Changes, state *Checkpoint, seq uint64) ([]byte, error) {
	rec := changeRecord{Version: CurrentVersion, BootID: ch.BootID, PartitionModeOn: ch.PartitionModeOn}
	for _, uid := range slices.Sorted(maps.Keys(ch.Claims)) {
		c := ch.Claims[uid]
		if c == nil {
			if _, ok := state.Claims[uid]; ok {
				rec.Deleted = append(rec.Deleted, uid)
			}
			continue
		}
		if rec.Claims == nil {
			rec.Claims = make(map[string]*claimRecord, len(ch.Claims))
		}
		rec.Claims[uid] = claimRecordOf(c)
	}
	payload, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	sum := checksum(payload)
	data := make([]byte, 0, len(payload)+len(sum)+64)
	data = append(data, `{"checksum":"`...)
	data = append(data, sum...)
	data = append(data, `","sequence":`...)
	data = strconv.AppendUint(data, seq, 10)
	data = append(data, `,"change":`...)
	data = append(data, payload...)
	return append(data, '}', '\n'), nil
}

func claimRecordOf(c *Claim) *claimRecord {
	r := &claimRecord{UID: c.UID, Namespace: c.Namespace, Name: c.Name, State: c.State, Updated: c.Updated, Unconfirmed: c.Unconfirmed}
	if c.Devices != nil {
		r.Devices = make([]DeviceRecord, len(c.Devices))
		for i, d := range c.Devices {
			r.Devices[i] = RecordOf(d)
		}
	}
	return r
}

// logLine is one record as the log holds it.
type logLine struct {
	Checksum string          `json:"checksum"`
	Sequence uint64          `json:"sequence"`
	Change   json.RawMessage `json:"change"`
}

// decodeRecord parses and verifies one record (a line without its
// newline): the changes it saved and its sequence.
func decodeRecord(line []byte) (*Changes, uint64, error) {
	var l logLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, 0, fmt.Errorf("parse: %w", err)
	}
	payload, err := verified(l.Checksum, l.Change)
	if err != nil {
		return nil, 0, err
	}
	var rec changeRecord
	if err := json.Unmarshal(payload, &rec); err != nil {
		return nil, 0, fmt.Errorf("parse change: %w", err)
	}
	ch := &Changes{BootID: rec.BootID, PartitionModeOn: rec.PartitionModeOn, Claims: make(map[string]*Claim, len(rec.Claims)+len(rec.Deleted))}
	for uid, r := range rec.Claims {
		c := r.claim()
		if err := c.valid(uid); err != nil {
			return nil, 0, err
		}
		ch.Claims[uid] = c
	}
	for _, uid := range rec.Deleted {
		if _, put := ch.Claims[uid]; put {
			return nil, 0, fmt.Errorf("claim %s: both put and deleted", uid)
		}
		ch.Claims[uid] = nil
	}
	return ch, l.Sequence, nil
}

// logScan is what readLog found.
type logScan struct {
	// present: there is a log file; based: its header names the snapshot
	// it was read on top of, so its records were replayed.
	present, based bool
	// seq is the sequence of the last record replayed (the snapshot's when
	// none was).
	seq uint64
	// end is where the valid lines end (the next record goes there), size
	// the file's size: beyond end lies a torn tail, or what follows bad.
	end, size int64
	// bad is why a complete line is not the next valid record; replay
	// stopped before it.
	bad error
}

// readLog replays onto cp, read from the snapshot of sequence seq and
// checksum sum, the records of the log at path that follow it. Only a
// failure to read the file is returned as an error.
func readLog(path string, seq uint64, sum string, cp *Checkpoint) (logScan, error) {
	sc := logScan{seq: seq}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return sc, nil
	}
	if err != nil {
		return sc, fmt.Errorf("read checkpoint log %s: %w", path, err)
	}
	sc.present, sc.size = true, int64(len(data))
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return sc, nil // a header cut short: a rewrite of the log after a compaction, whose snapshot holds it all
	}
	var h logHeader
	if err := json.Unmarshal(data[:nl], &h); err != nil {
		sc.bad = fmt.Errorf("header: parse: %w", err)
		return sc, nil
	}
	if h.Log != logFormat {
		sc.bad = fmt.Errorf("header: unknown log format %d (this agent reads %d)", h.Log, logFormat)
		return sc, nil
	}
	if h.Base != seq || h.BaseChecksum != sum {
		return sc, nil // stale: written on top of another snapshot
	}
	sc.based = true
	off := nl + 1
	sc.end = int64(off)
	for off < len(data) {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			break // torn tail: the last save, cut short
		}
		ch, rseq, err := decodeRecord(data[off : off+nl])
		switch {
		case err != nil:
			sc.bad = fmt.Errorf("record at byte %d: %w", off, err)
		case rseq != sc.seq+1:
			sc.bad = fmt.Errorf("record at byte %d: sequence %d, want %d", off, rseq, sc.seq+1)
		}
		if sc.bad != nil {
			return sc, nil
		}
		cp.apply(ch)
		sc.seq = rseq
		off += nl + 1
		sc.end = int64(off)
	}
	return sc, nil
}

// apply makes ch's changes to cp, which takes ch's claims as they are, and
// returns what undoes them.
func (cp *Checkpoint) apply(ch *Changes) (undo func()) {
	type was struct {
		c  *Claim
		ok bool
	}
	prev := make(map[string]was, len(ch.Claims))
	boot, modeOn := cp.BootID, cp.PartitionModeOn
	if cp.Claims == nil {
		cp.Claims = map[string]*Claim{}
	}
	for uid, c := range ch.Claims {
		old, ok := cp.Claims[uid]
		prev[uid] = was{old, ok}
		if c == nil {
			delete(cp.Claims, uid)
		} else {
			cp.Claims[uid] = c
		}
	}
	cp.BootID, cp.PartitionModeOn = ch.BootID, ch.PartitionModeOn
	return func() {
		for uid, w := range prev {
			if w.ok {
				cp.Claims[uid] = w.c
			} else {
				delete(cp.Claims, uid)
			}
		}
		cp.BootID, cp.PartitionModeOn = boot, modeOn
	}
}

// writeLog replaces the log at path with data (mode 0600 when it creates
// it): cut to nothing first, so that a rewrite cut short leaves a torn
// tail, never a new start before old lines.
func writeLog(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// appendLog writes rec into the log at path at off, the end of its valid
// lines; cut: what lies beyond off (a torn tail) goes first.
func appendLog(path string, rec []byte, off int64, cut bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = func() error {
		if cut {
			if err := f.Truncate(off); err != nil {
				return err
			}
		}
		_, err := f.WriteAt(rec, off)
		return err
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
