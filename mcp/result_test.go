package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawSession is a JSON-RPC connection to srv over a newline-delimited
// stream: each call returns the line the server wrote, byte for byte.
type rawSession struct {
	t   testing.TB
	in  *io.PipeWriter
	out *bufio.Reader
}

func openRaw(t testing.TB, srv *gomcp.Server, protocol string) *rawSession {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ss, err := srv.Connect(context.Background(), &gomcp.IOTransport{Reader: sr, Writer: sw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cw.Close(); ss.Close() })
	r := &rawSession{t: t, in: cw, out: bufio.NewReaderSize(cr, 1<<20)}
	r.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + protocol + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	r.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawSession) write(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawSession) call(line string) []byte {
	r.t.Helper()
	r.write(line)
	b, err := r.out.ReadBytes('\n')
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// TestPlainResultsWriteTheSameBytes answers the same tools/call requests
// from a server that hands the go-sdk plain results and from one that
// encodes them the go-sdk's way (as before result.go): every response is
// the same, byte for byte, for texts that need escaping, HTML characters,
// errors quoting their input and both result shapes (with and without
// resultType).
func TestPlainResultsWriteTheSameBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	var ids []string
	for _, text := range []string{
		"plain", "<b>bold</b> & co", "line \u2028 \u2029", `back\slash "quoted" \u003c \\u0026`, "caf\u00e9 \U0001F600",
	} {
		d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: text, Body: "tab\tnew\nline " + text}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:raw"
		r, err := s.Send(mailroom.WithCaller(ctx, alice), d)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
	}
	calls := []string{
		`"list_messages","arguments":{"limit":50}`,
		`"list_messages","arguments":{"limit":2,"query":"bold"}`,
		`"mailbox_status","arguments":{}`,
		`"list_concepts","arguments":{}`,
		`"get_message","arguments":{"messageId":"<MESSAGE:bogus>"}`,
		`"mark_read","arguments":{"messageId":["MESSAGE:bogus"]}`,
		`"add_message","arguments":{"to":"<nobody>","subject":"s","body":"b"}`,
		`"list_messages","arguments":{"bogus":1}`,
		`"no_such_tool","arguments":{}`,
	}
	for _, id := range ids {
		calls = append(calls, `"get_message","arguments":{"messageId":"`+id+`"}`)
	}
	for _, protocol := range []string{"2025-11-25", "2026-07-28"} {
		plain := openRaw(t, NewServer(s, Options{Identity: &bob}).MCPServer(), protocol)
		sdk := openRaw(t, NewServer(s, Options{Identity: &bob, sdkResults: true}).MCPServer(), protocol)
		for i, c := range calls {
			req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s}}`, i+1, c)
			got, want := plain.call(req), sdk.call(req)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: %s\n plain: %s\n   sdk: %s", protocol, c, got, want)
			}
		}
		// The resultType case is really exercised: a 2026-07-28 client
		// gets one.
		got := plain.call(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"mailbox_status","arguments":{}}}`)
		if has := bytes.Contains(got, []byte(`"resultType":"complete"`)); has != (protocol == "2026-07-28") {
			t.Errorf("%s: resultType in %s", protocol, got)
		}
	}
}

// TestToPlainTakesOrdinaryResults checks which results take the plain
// path: every ordinary answer does; content the go-sdk writes with more
// fields, or texts it would HTML-escape, do not.
func TestToPlainTakesOrdinaryResults(t *testing.T) {
	t.Parallel()
	page := mailroom.Page{Messages: []mailroom.Row{{MessageID: "MESSAGE:x", Subject: "s", SentAt: time.Unix(0, 0).UTC()}}}
	b, _ := json.Marshal(page)
	text := func(s string) *gomcp.TextContent { return &gomcp.TextContent{Text: s} }
	for _, c := range []struct {
		name string
		res  *gomcp.CallToolResult
		want bool
	}{
		{"page", &gomcp.CallToolResult{Content: []gomcp.Content{text(string(b)), text(mailroom.TrustNotice)}, StructuredContent: structured(page, b)}, true},
		{"error", &gomcp.CallToolResult{Content: []gomcp.Content{text("Message not found: MESSAGE:x")}, IsError: true}, true},
		{"no content", &gomcp.CallToolResult{Content: []gomcp.Content{}}, true},
		{"raw structured", &gomcp.CallToolResult{Content: []gomcp.Content{text("{}")}, StructuredContent: json.RawMessage(`{}`)}, true},
		{"meta", &gomcp.CallToolResult{Meta: gomcp.Meta{"k": "v"}, Content: []gomcp.Content{text("x")}}, true},
		{"text with <", &gomcp.CallToolResult{Content: []gomcp.Content{text(`bad "<x>"`)}, IsError: true}, false},
		{"annotated", &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: "x", Annotations: &gomcp.Annotations{Priority: 1}}}}, false},
		{"image", &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}}, false},
		{"request state", &gomcp.CallToolResult{Content: []gomcp.Content{text("x")}, RequestState: "s"}, false},
	} {
		p, ok := toPlain(c.res)
		if ok != c.want {
			t.Errorf("%s: plain %v, want %v", c.name, ok, c.want)
			continue
		}
		if ok {
			if got, want := encodeAsResponse(t, p), encodeAsResponse(t, c.res); !bytes.Equal(got, want) {
				t.Errorf("%s:\n plain: %s\n   sdk: %s", c.name, got, want)
			}
		}
	}
}

// encodeAsResponse encodes v as the go-sdk's jsonrpc2 encodes a result:
// json.Encoder without HTML escaping.
func encodeAsResponse(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzPlainResult: whatever the strings in a result, the plain form, when
// taken, encodes to the go-sdk's bytes.
func FuzzPlainResult(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\u2028\u2029", "\x00\x1f\x7f", "\xff", `\u003c`, `\\u003c`, `"\`, "\U0001F600"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, subject, errText string) {
		row := mailroom.Row{MessageID: "MESSAGE:x", Subject: subject, To: []string{subject}}
		b, err := json.Marshal(row)
		if err != nil {
			t.Skip()
		}
		for _, res := range []*gomcp.CallToolResult{
			{Content: []gomcp.Content{&gomcp.TextContent{Text: string(b)}}, StructuredContent: structured(row, b)},
			{Content: []gomcp.Content{&gomcp.TextContent{Text: errText}}, IsError: true},
		} {
			p, ok := toPlain(res)
			if !ok {
				continue
			}
			if got, want := encodeAsResponse(t, p), encodeAsResponse(t, res); !bytes.Equal(got, want) {
				t.Fatalf("plain: %s\n  sdk: %s", got, want)
			}
		}
	})
}
