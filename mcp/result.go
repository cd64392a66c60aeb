package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// plainResult is a tools/call result in the go-sdk's wire form (the same
// fields, names and order as CallToolResult's MarshalJSON) as a plain
// struct, with no MarshalJSON of its own.
//
// Why: encoding/json re-scans ("compacts") whatever a MarshalJSON returns,
// and a go-sdk result goes through three of them before it is written
// (each TextContent, the CallToolResult, the JSON-RPC message that holds
// it): a page of 50 rows (33 KB) was scanned eight times over, a third of
// the server's CPU per page (docs/benchmarks.md, issue 13). Written as
// plain fields it is encoded in one pass; the JSON-RPC message's own scan
// (internal to the go-sdk) is the only one left.
type plainResult struct {
	gomcp.ResultBase              // _meta, and the Result interface
	Content           []plainText `json:"content"`
	StructuredContent any         `json:"structuredContent,omitempty"`
	IsError           bool        `json:"isError,omitempty"`
	ResultType        string      `json:"resultType,omitempty"`
}

// plainText is a TextContent without _meta or annotations, as the go-sdk
// writes it.
type plainText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// The rest of a result, as the go-sdk writes it once content, structured
// content, isError and _meta are taken out: nothing, or the resultType
// that newer protocol versions (2026-07-28) carry. Any other shape (input
// requests, a request state, a field a later go-sdk adds) is left to the
// go-sdk.
const (
	restNone     = `{"content":[]}`
	restComplete = `{"content":[],"resultType":"complete"}`
)

// structured is the structuredContent of a result whose JSON (encoded by
// json.Marshal) is b: the value itself, which the response encodes in its
// one pass, unless b holds an HTML-escaped <, > or &. The go-sdk's
// response encoder does not HTML-escape, json.Marshal does: the bytes
// themselves then keep the response what it always was, at the cost of
// one more scan.
func structured(out any, b []byte) any {
	if out == nil || htmlEscaped(b) {
		return json.RawMessage(b)
	}
	return out
}

// htmlEscaped reports whether b holds \u003c, \u003e or \u0026.
func htmlEscaped(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 {
			return false
		}
		b = b[i+1:]
		if len(b) >= 5 && b[0] == 'u' && b[1] == '0' && b[2] == '0' {
			switch string(b[3:5]) {
			case "3c", "3e", "26":
				return true
			}
		}
		if len(b) > 0 {
			b = b[1:] // the escaped character: after "\\" a "u003c" is text
		}
	}
}

// plainResults is a receiving middleware that hands the go-sdk each
// tools/call result as a plainResult when that writes the same JSON.
func plainResults(next gomcp.MethodHandler) gomcp.MethodHandler {
	return func(ctx context.Context, method string, req gomcp.Request) (gomcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/call" {
			return res, err
		}
		r, ok := res.(*gomcp.CallToolResult)
		if !ok || r == nil || perRequestProtocol(req) {
			return res, err
		}
		if p, ok := toPlain(r); ok {
			return p, nil
		}
		return res, nil
	}
}

// perRequestProtocol reports a request that names its protocol version in
// _meta (SEP-2575): the go-sdk annotates its result after the middleware
// has run, through methods only its own result types have.
func perRequestProtocol(req gomcp.Request) bool {
	r, ok := req.(*gomcp.CallToolRequest)
	if !ok || r.Params == nil {
		return true
	}
	_, ok = r.Params.Meta[gomcp.MetaKeyProtocolVersion]
	return ok
}

// toPlain converts r, or reports that it cannot be written the same way.
func toPlain(r *gomcp.CallToolResult) (*plainResult, bool) {
	// The result's other fields (resultType is unexported) are read by
	// asking the go-sdk to write everything else (about a microsecond).
	rest := *r
	rest.Meta, rest.Content, rest.StructuredContent, rest.IsError = nil, []gomcp.Content{}, nil, false
	b, err := rest.MarshalJSON()
	if err != nil {
		return nil, false
	}
	p := &plainResult{StructuredContent: r.StructuredContent, IsError: r.IsError}
	switch string(b) {
	case restNone:
	case restComplete:
		p.ResultType = "complete"
	default:
		return nil, false
	}
	p.Meta = r.Meta
	p.Content = make([]plainText, len(r.Content))
	for i, c := range r.Content {
		t, ok := c.(*gomcp.TextContent)
		// json.Marshal would HTML-escape <, > and & where the response's
		// encoder does not: such a text (an error quoting its input) keeps
		// the go-sdk's encoding.
		if !ok || t.Meta != nil || t.Annotations != nil || strings.ContainsAny(t.Text, "<>&") {
			return nil, false
		}
		p.Content[i] = plainText{Type: "text", Text: t.Text}
	}
	return p, true
}
