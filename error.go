// Package mailroom holds the domain of the mailroom mailbox: identities,
// addresses, messages, read state, and the rules that decide them. It does no
// I/O; the store and transport packages adapt it to SQLite, PostgreSQL and MCP.
package mailroom

import (
	"errors"
	"fmt"
)

// Error codes. Transports map them to their own form (an MCP isError result,
// an HTTP status).
const (
	EINVALID      = "invalid"      // bad input; nothing was changed
	ENOTFOUND     = "not_found"    // missing, or not visible to the caller
	EFORBIDDEN    = "forbidden"    // visible, but the caller may not do this
	EUNAUTHORIZED = "unauthorized" // no identity bound
	ECONFLICT     = "conflict"     // the state does not allow it
	EBUDGET       = "budget"       // the call ran past its cost budget and was stopped; nothing changed
	EINTERNAL     = "internal"     // storage or driver failure
)

// Error is an application error: a code and a one-line message meant for the
// caller.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of an application error, EINTERNAL for any other
// non-nil error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the caller-facing message of err. Non-application
// errors are hidden behind "internal error"; the operator sees them in logs.
func ErrorMessage(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Message
	}
	return "internal error"
}

// NotFound is the one answer for a message that does not exist or that the
// caller may not see; it never hints which.
func NotFound(messageID string) *Error {
	return Errorf(ENOTFOUND, "Message not found: %s", messageID)
}
