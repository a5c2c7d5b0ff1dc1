package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The file is an envelope around the checkpoint so that a torn or edited
// file is detected, not half-trusted: JSON that parses is not enough.
type envelope struct {
	// Checksum is "sha256:<hex>" of the compact JSON of the payload
	// (fileRecord).
	Checksum string `json:"checksum"`
	// Sequence orders the two files (Store); absent (0) in files of
	// earlier agents, which wrote one.
	Sequence   uint64          `json:"sequence,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint"`
}

const checksumPrefix = "sha256:"

// encode renders cp as it is, Version included, inside its envelope with
// sequence seq.
func encode(cp *Checkpoint, seq uint64) ([]byte, error) {
	data, _, err := encodeSum(cp, seq)
	return data, err
}

// encodeSum is encode, and the checksum the envelope carries: with the
// sequence, what names this snapshot to the log that follows it (log.go).
func encodeSum(cp *Checkpoint, seq uint64) ([]byte, string, error) {
	if err := cp.validate(); err != nil {
		return nil, "", err
	}
	// json.Marshal is deterministic (sorted map keys) and compact: its
	// output is the canonical form the checksum covers. fileOf writes no
	// claims as an empty object, not null.
	payload, err := json.Marshal(fileOf(cp))
	if err != nil {
		return nil, "", fmt.Errorf("encode: %w", err)
	}
	// Written as is, not indented: re-indenting the payload cost more than
	// encoding it, on every prepare, growing with the claims held (jq
	// reads it). decode compacts what it reads, so indented files of
	// earlier versions load too.
	sum := checksum(payload)
	data := make([]byte, 0, len(payload)+len(sum)+64) // 64: the envelope's own bytes
	data = append(data, `{"checksum":"`...)
	data = append(data, sum...)
	data = append(data, '"')
	if seq > 0 { // 0: the one-file format of earlier agents (tests)
		data = append(data, `,"sequence":`...)
		data = strconv.AppendUint(data, seq, 10)
	}
	data = append(data, `,"checkpoint":`...)
	data = append(data, payload...)
	data = append(data, '}')
	return append(data, '\n'), sum, nil
}

func checksum(compact []byte) string {
	sum := sha256.Sum256(compact)
	return checksumPrefix + hex.EncodeToString(sum[:])
}

// decode parses and verifies a checkpoint file, and returns its sequence.
func decode(data []byte) (*Checkpoint, uint64, error) {
	cp, seq, _, err := decodeSum(data)
	return cp, seq, err
}

// decodeSum is decode, and the file's checksum (encodeSum).
func decodeSum(data []byte) (*Checkpoint, uint64, string, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, 0, "", fmt.Errorf("parse: %w", err)
	}
	payload, err := verified(env.Checksum, env.Checkpoint)
	if err != nil {
		return nil, 0, "", err
	}
	var f fileRecord
	if err := json.Unmarshal(payload, &f); err != nil {
		return nil, 0, "", fmt.Errorf("parse payload: %w", err)
	}
	cp := f.checkpoint()
	if err := cp.validate(); err != nil {
		return nil, 0, "", err
	}
	return cp, env.Sequence, env.Checksum, nil
}

// verified checks raw, the payload of a snapshot or of a log record,
// against the checksum written with it, and brings it to the current
// version.
func verified(sum string, raw json.RawMessage) ([]byte, error) {
	if !strings.HasPrefix(sum, checksumPrefix) || len(raw) == 0 {
		return nil, errors.New("no checksum or no checkpoint")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("parse payload: %w", err)
	}
	if got := checksum(compact.Bytes()); got != sum {
		return nil, fmt.Errorf("checksum mismatch: file says %s, content has %s", sum, got)
	}
	return upgrade(compact.Bytes())
}
