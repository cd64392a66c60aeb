package mailroom_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mailroom/mailroom"
)

func ptr[T any](v T) *T { return &v }

func TestMarkReadRequest(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	tests := []struct {
		name    string
		in      mailroom.MarkReadInput
		want    mailroom.MarkReadRequest
		wantErr string
	}{
		{"a scalar id marks one", mailroom.MarkReadInput{MessageID: raw("MESSAGE:a")},
			mailroom.MarkReadRequest{Mode: mailroom.MarkOne, IDs: []string{"MESSAGE:a"}}, ""},
		{"a native array marks each in order", mailroom.MarkReadInput{MessageID: raw([]string{"MESSAGE:b", "MESSAGE:a"})},
			mailroom.MarkReadRequest{Mode: mailroom.MarkMany, IDs: []string{"MESSAGE:b", "MESSAGE:a"}}, ""},
		{"a stringified array of MESSAGE ids takes the array path", mailroom.MarkReadInput{MessageID: raw(`["MESSAGE:a","MESSAGE:bogus"]`)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkMany, IDs: []string{"MESSAGE:a", "MESSAGE:bogus"}}, ""},
		{"a stringified array with spaces takes the array path", mailroom.MarkReadInput{MessageID: raw(` [ "MESSAGE:a" ] `)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkMany, IDs: []string{"MESSAGE:a"}}, ""},
		{"a stringified empty array is a scalar", mailroom.MarkReadInput{MessageID: raw(`[]`)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkOne, IDs: []string{`[]`}}, ""},
		{"a stringified array of numbers is a scalar", mailroom.MarkReadInput{MessageID: raw(`[1]`)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkOne, IDs: []string{`[1]`}}, ""},
		{"a stringified object is a scalar", mailroom.MarkReadInput{MessageID: raw(`{"a":"MESSAGE:a"}`)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkOne, IDs: []string{`{"a":"MESSAGE:a"}`}}, ""},
		{"a stringified array with a non-MESSAGE element is a scalar", mailroom.MarkReadInput{MessageID: raw(`["MESSAGE:a","x"]`)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkOne, IDs: []string{`["MESSAGE:a","x"]`}}, ""},
		{"a stringified array of a nested array is a scalar", mailroom.MarkReadInput{MessageID: raw(`[["MESSAGE:a"]]`)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkOne, IDs: []string{`[["MESSAGE:a"]]`}}, ""},
		{"invalid JSON is a scalar", mailroom.MarkReadInput{MessageID: raw(`["MESSAGE:a"`)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkOne, IDs: []string{`["MESSAGE:a"`}}, ""},
		{"all marks the snapshot", mailroom.MarkReadInput{All: true},
			mailroom.MarkReadRequest{Mode: mailroom.MarkAll}, ""},
		{"all with through and includeRoles", mailroom.MarkReadInput{All: true, Through: ptr("MESSAGE:w"), IncludeRoles: ptr(true)},
			mailroom.MarkReadRequest{Mode: mailroom.MarkAll, Through: "MESSAGE:w", IncludeRoles: true}, ""},
		{"all: false with an id counts as absent", mailroom.MarkReadInput{MessageID: raw("MESSAGE:a"), All: false},
			mailroom.MarkReadRequest{Mode: mailroom.MarkOne, IDs: []string{"MESSAGE:a"}}, ""},
		{"both messageId and all", mailroom.MarkReadInput{MessageID: raw("MESSAGE:a"), All: true}, mailroom.MarkReadRequest{},
			"mark_read takes either messageId or all: true, not both"},
		{"neither", mailroom.MarkReadInput{}, mailroom.MarkReadRequest{},
			"mark_read needs messageId (an id or a list of ids) or all: true"},
		{"a null messageId is absent", mailroom.MarkReadInput{MessageID: json.RawMessage("null")}, mailroom.MarkReadRequest{},
			"mark_read needs messageId (an id or a list of ids) or all: true"},
		{"through without all", mailroom.MarkReadInput{MessageID: raw("MESSAGE:a"), Through: ptr("MESSAGE:w")}, mailroom.MarkReadRequest{},
			"through applies only with all: true"},
		{"through alone", mailroom.MarkReadInput{Through: ptr("MESSAGE:w")}, mailroom.MarkReadRequest{},
			"through applies only with all: true"},
		{"includeRoles without all", mailroom.MarkReadInput{MessageID: raw("MESSAGE:a"), IncludeRoles: ptr(true)}, mailroom.MarkReadRequest{},
			"includeRoles applies only with all: true"},
		{"a native empty array", mailroom.MarkReadInput{MessageID: raw([]string{})}, mailroom.MarkReadRequest{},
			"messageId must not be an empty array"},
		{"an empty string", mailroom.MarkReadInput{MessageID: raw("")}, mailroom.MarkReadRequest{},
			"messageId must not be empty"},
		{"a number", mailroom.MarkReadInput{MessageID: raw(7)}, mailroom.MarkReadRequest{},
			"messageId must be a string or an array of strings"},
		{"an array with a number", mailroom.MarkReadInput{MessageID: json.RawMessage(`["MESSAGE:a", 1]`)}, mailroom.MarkReadRequest{},
			"messageId must be a string or an array of strings"},
		{"a malformed through", mailroom.MarkReadInput{All: true, Through: ptr("nope")}, mailroom.MarkReadRequest{},
			"Message not found: nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Request()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if mailroom.ErrorCode(err) == mailroom.EINTERNAL {
					t.Fatalf("err %v is not an application error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDrainReceiptSettle(t *testing.T) {
	tests := []struct {
		name                              string
		matched, read, durableN, failures int
		durable                           bool
		wantStatus                        string
		wantDurable                       int
		wantNote                          bool
	}{
		{"an empty snapshot is a noop", 0, 0, 0, 0, true, "noop", 0, false},
		{"everything read and held", 3, 3, 3, 0, true, "read", 3, false},
		{"a failure makes it partial", 3, 2, 2, 1, true, "partial", 2, false},
		{"fewer held than read is partial", 3, 3, 2, 0, true, "partial", 2, false},
		{"memory store reports nothing durable and says why", 3, 3, 3, 0, false, "read", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mailroom.DrainReceipt{MatchedCount: tt.matched, ReadCount: tt.read, DurableCount: tt.durableN}
			for range tt.failures {
				r.Failures = append(r.Failures, mailroom.Failure{MessageID: "MESSAGE:x", Error: "e"})
			}
			r.Settle(tt.durable)
			if r.Status != tt.wantStatus || r.DurableCount != tt.wantDurable || (r.Note != "") != tt.wantNote || r.FailureCount != tt.failures {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func FuzzStringifiedIDs(f *testing.F) {
	for _, s := range []string{`["MESSAGE:a"]`, `[]`, `[1]`, `{"a":1}`, `["x"]`, `["MESSAGE:a"`, `MESSAGE:a`, `[ "MESSAGE:\u0041" ]`, `["MESSAGE:a",null]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, ok := mailroom.StringifiedIDs(s)
		if !ok {
			if ids != nil {
				t.Fatalf("ids %v with ok=false", ids)
			}
			return
		}
		if len(ids) == 0 {
			t.Fatal("empty list accepted")
		}
		var back []string
		if err := json.Unmarshal([]byte(s), &back); err != nil || !reflect.DeepEqual(back, ids) {
			t.Fatalf("%q: accepted %v but JSON says %v (%v)", s, ids, back, err)
		}
		for _, id := range ids {
			if len(id) < len(mailroom.MessagePrefix) || id[:len(mailroom.MessagePrefix)] != mailroom.MessagePrefix {
				t.Fatalf("%q: accepted element %q without the MESSAGE: prefix", s, id)
			}
		}
	})
}
