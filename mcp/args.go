package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mailroom/mailroom"
)

// spoofKeys are argument names that claim an identity. The server stamps
// identity from the transport, so these are refused before anything else, with
// a message that says why.
var spoofKeys = map[string]bool{
	"from": true, "sender": true, "senderid": true, "sender_id": true, "agentid": true,
	"agent_id": true, "identity": true, "userid": true, "user_id": true, "author": true,
}

// args holds one call's arguments, checked for shape but not yet typed.
type args map[string]json.RawMessage

// parseArgs checks raw against the tool's declared argument names: identity
// overrides first (for tools that stamp the sender), then unknown names, then
// text that is not valid UTF-8.
func parseArgs(raw json.RawMessage, declared []string, stampsSender bool) (args, error) {
	a := args{}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		if trimmed[0] != '{' {
			return nil, mailroom.Errorf(mailroom.EINVALID, "arguments must be a JSON object")
		}
		if err := json.Unmarshal(trimmed, &a); err != nil {
			return nil, mailroom.Errorf(mailroom.EINVALID, "arguments are not valid JSON: %v", err)
		}
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	isDeclared := func(k string) bool {
		for _, d := range declared {
			if d == k {
				return true
			}
		}
		return false
	}
	for _, k := range keys {
		if stampsSender && !isDeclared(k) && spoofKeys[strings.ToLower(k)] {
			return nil, mailroom.Errorf(mailroom.EINVALID, "Identity-override spoof rejected: '%s' is stamped by the server", k)
		}
	}
	for _, k := range keys {
		if !isDeclared(k) {
			return nil, mailroom.Errorf(mailroom.EINVALID, "Unknown argument '%s'", k)
		}
	}
	for _, k := range keys {
		if err := checkJSONText(a[k]); err != nil {
			return nil, mailroom.Errorf(mailroom.EINVALID, "%s contains %v", k, err)
		}
	}
	return a, nil
}

// checkJSONText reports invalid text inside the JSON strings of v: raw bytes
// that are not UTF-8, and \u escapes of unpaired surrogates, which Go's
// decoder would otherwise turn silently into U+FFFD.
func checkJSONText(v []byte) error {
	if !utf8.Valid(v) {
		return fmt.Errorf("invalid UTF-8")
	}
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 >= len(v) {
			continue
		}
		if v[i+1] != 'u' {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		r, ok := hex4(v, i+2)
		if !ok {
			return fmt.Errorf("a malformed \\u escape")
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := uint16(0), false
			if i+7 < len(v) && v[i+6] == '\\' && v[i+7] == 'u' {
				lo, ok = hex4(v, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("invalid UTF-8 (a lone surrogate \\u%04x)", r)
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("invalid UTF-8 (a lone surrogate \\u%04x)", r)
		default:
			i += 5
		}
	}
	return nil
}

func hex4(v []byte, at int) (uint16, bool) {
	if at+4 > len(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v[at:at+4]), 16, 16)
	return uint16(n), err == nil
}

func (a args) has(name string) bool {
	v, ok := a[name]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func jsonType(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func typeErr(name, want string, v json.RawMessage) error {
	return mailroom.Errorf(mailroom.EINVALID, "%s must be %s (got %s)", name, want, jsonType(v))
}

func (a args) required(name string) error {
	if !a.has(name) {
		return mailroom.Errorf(mailroom.EINVALID, "%s is required", name)
	}
	return nil
}

func (a args) str(name string) (string, error) {
	if !a.has(name) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(a[name], &s); err != nil {
		return "", typeErr(name, "a string", a[name])
	}
	return s, nil
}

func (a args) optStr(name string) (*string, error) {
	if !a.has(name) {
		return nil, nil
	}
	s, err := a.str(name)
	return &s, err
}

func (a args) strList(name string) ([]string, error) {
	if !a.has(name) {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal(a[name], &l); err != nil {
		return nil, typeErr(name, "an array of strings", a[name])
	}
	return l, nil
}

func (a args) strOrList(name string) ([]string, error) {
	if !a.has(name) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(a[name], &s) == nil {
		return []string{s}, nil
	}
	var l []string
	if err := json.Unmarshal(a[name], &l); err != nil {
		return nil, typeErr(name, "a string or an array of strings", a[name])
	}
	return l, nil
}

func (a args) boolean(name string) (bool, error) {
	b, err := a.optBool(name)
	if b == nil {
		return false, err
	}
	return *b, err
}

func (a args) optBool(name string) (*bool, error) {
	if !a.has(name) {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(a[name], &b); err != nil {
		return nil, typeErr(name, "true or false", a[name])
	}
	return &b, nil
}

func (a args) integer(name string) (*int, error) {
	if !a.has(name) {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(a[name], &f); err != nil {
		return nil, typeErr(name, "an integer", a[name])
	}
	if f != float64(int(f)) || f > 1e15 || f < -1e15 {
		return nil, mailroom.Errorf(mailroom.EINVALID, "%s must be an integer (got %s)", name, strings.TrimSpace(string(a[name])))
	}
	n := int(f)
	return &n, nil
}
