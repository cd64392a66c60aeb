package mailroom

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// MarkMode is what a mark_read call asks for.
type MarkMode int

// Mark modes.
const (
	MarkOne  MarkMode = iota + 1 // one id; a scalar receipt
	MarkMany                     // a list of ids; one result per id, in order
	MarkAll                      // the caller's unread snapshot; a compact receipt
)

// MarkReadInput is mark_read's arguments as they arrived. MessageID keeps the
// raw JSON value, because the same string can mean one id or a serialised list.
type MarkReadInput struct {
	MessageID    json.RawMessage // nil when absent
	All          bool
	Through      *string
	IncludeRoles *bool
}

// MarkReadRequest is a decided mark_read call.
type MarkReadRequest struct {
	Mode         MarkMode
	IDs          []string // MarkOne: one id; MarkMany: the ids in order
	Through      string   // MarkAll: optional watermark
	IncludeRoles bool     // MarkAll: also drain role queues
}

// Request decides what in asks for, or explains why it is malformed.
func (in MarkReadInput) Request() (MarkReadRequest, error) {
	hasID := len(in.MessageID) > 0 && !bytes.Equal(bytes.TrimSpace(in.MessageID), []byte("null"))
	switch {
	case hasID && in.All:
		return MarkReadRequest{}, Errorf(EINVALID, "mark_read takes either messageId or all: true, not both")
	case !in.All && in.Through != nil:
		return MarkReadRequest{}, Errorf(EINVALID, "through applies only with all: true")
	case !in.All && in.IncludeRoles != nil:
		return MarkReadRequest{}, Errorf(EINVALID, "includeRoles applies only with all: true")
	case !hasID && !in.All:
		return MarkReadRequest{}, Errorf(EINVALID, "mark_read needs messageId (an id or a list of ids) or all: true")
	}
	if in.All {
		r := MarkReadRequest{Mode: MarkAll}
		if in.Through != nil {
			if err := ValidateMessageID("through", *in.Through); err != nil {
				return MarkReadRequest{}, err
			}
			r.Through = *in.Through
		}
		if in.IncludeRoles != nil {
			r.IncludeRoles = *in.IncludeRoles
		}
		return r, nil
	}
	var s string
	if err := json.Unmarshal(in.MessageID, &s); err == nil {
		if s == "" {
			return MarkReadRequest{}, Errorf(EINVALID, "messageId must not be empty")
		}
		ids, ok := StringifiedIDs(s)
		if !ok {
			return MarkReadRequest{Mode: MarkOne, IDs: []string{s}}, nil
		}
		return manyIDs(ids)
	}
	var ids []string
	if err := json.Unmarshal(in.MessageID, &ids); err != nil {
		return MarkReadRequest{}, Errorf(EINVALID, "messageId must be a string or an array of strings")
	}
	if len(ids) == 0 {
		return MarkReadRequest{}, Errorf(EINVALID, "messageId must not be an empty array")
	}
	return manyIDs(ids)
}

// manyIDs is the array path, whichever form the array came in.
func manyIDs(ids []string) (MarkReadRequest, error) {
	if len(ids) > MaxMarkIDs {
		return MarkReadRequest{}, Errorf(EINVALID, "messageId accepts at most %d ids (got %d); use all: true to drain the inbox", MaxMarkIDs, len(ids))
	}
	return MarkReadRequest{Mode: MarkMany, IDs: ids}, nil
}

// MaxMarkIDs bounds one array call; all: true has no bound.
const MaxMarkIDs = 1000

// StringifiedIDs recognises the serialised bulk form that some client
// harnesses send for a declared string[]: a JSON array, not empty, whose every
// element is a string starting with MESSAGE:. Anything else is a scalar id.
func StringifiedIDs(s string) ([]string, bool) {
	if !stringifiedIDsEnabled {
		return nil, false
	}
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "[") {
		return nil, false
	}
	var elems []json.RawMessage
	if err := json.Unmarshal([]byte(t), &elems); err != nil || len(elems) == 0 {
		return nil, false
	}
	ids := make([]string, len(elems))
	for i, e := range elems {
		if err := json.Unmarshal(e, &ids[i]); err != nil || e[0] != '"' || !strings.HasPrefix(ids[i], MessagePrefix) {
			return nil, false
		}
	}
	return ids, true
}

// MarkResult is one id's outcome in an array mark_read.
type MarkResult struct {
	MessageID string     `json:"messageId"`
	Status    string     `json:"status"` // "read" or "error"
	ReadAt    *time.Time `json:"readAt,omitempty"`
	Error     string     `json:"error,omitempty"`
	Err       error      `json:"-"`
}

// ReadReceipt is the scalar mark_read result.
type ReadReceipt struct {
	MessageID string    `json:"messageId"`
	ReadAt    time.Time `json:"readAt"`
	Status    string    `json:"status"`
	Durable   bool      `json:"durable"`
}

// Failure is one id that a drain could not mark.
type Failure struct {
	MessageID string `json:"messageId"`
	Error     string `json:"error"`
}

// DrainReceipt is the compact receipt of mark_read({all: true}).
type DrainReceipt struct {
	Status            string    `json:"status"` // noop, read or partial
	SnapshotAt        time.Time `json:"snapshotAt"`
	MatchedCount      int       `json:"matchedCount"`
	ReadCount         int       `json:"readCount"`
	DurableCount      int       `json:"durableCount"`
	FailureCount      int       `json:"failureCount"`
	Failures          []Failure `json:"failures"`
	WithheldRoleCount int       `json:"withheldRoleCount"`
	Durable           bool      `json:"durable"`
	Note              string    `json:"note,omitempty"`
}

// Settle fills the receipt's status and note from its counts. durable says
// whether the store outlives the process; durableCount must be what storage
// holds after commit, read back.
func (r *DrainReceipt) Settle(durable bool) {
	r.FailureCount = len(r.Failures)
	r.Durable = durable
	switch {
	case r.MatchedCount == 0:
		r.Status = "noop"
	case r.FailureCount > 0 || r.ReadCount < r.MatchedCount || (durable && r.DurableCount < r.ReadCount):
		r.Status = "partial"
	default:
		r.Status = "read"
	}
	if !durable {
		r.DurableCount = 0
		if r.MatchedCount > 0 {
			r.Note = "the store is in memory (--db :memory:): these reads end with the process"
		}
	}
}
