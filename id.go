package mailroom

import (
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// Id prefixes of the typed node ids.
const (
	MessagePrefix = "MESSAGE:"
	ThreadPrefix  = "THREAD:"
	SessionPrefix = "SESSION:"
	ConceptPrefix = "CONCEPT:"
)

// NewMessageID returns a time-ordered message id (UUIDv7).
func NewMessageID() string { return MessagePrefix + newV7() }

// NewThreadID returns a new thread id.
func NewThreadID() string { return ThreadPrefix + newV7() }

// NewSessionID returns a new session id.
func NewSessionID() string { return SessionPrefix + newV7() }

func newV7() string {
	u, err := uuid.NewV7()
	if err != nil {
		u = uuid.New()
	}
	return u.String()
}

var sessionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$`)

// CanonicalSession returns a session id in its typed form SESSION:<id>,
// accepting it with or without the prefix.
func CanonicalSession(field, s string) (string, error) {
	id := strings.TrimPrefix(strings.TrimSpace(s), SessionPrefix)
	if !sessionRE.MatchString(id) {
		return "", Errorf(EINVALID, "%s: invalid session id %q (letters, digits and ._:@/- up to 200 characters)", field, s)
	}
	return SessionPrefix + id, nil
}

var ticketRE = regexp.MustCompile(`^(?:([A-Za-z0-9][A-Za-z0-9._-]{0,99})/([A-Za-z0-9][A-Za-z0-9._-]{0,99}))?#([0-9]{1,12})$`)

// CanonicalTicket validates a ticket reference, #123 or owner/repo#123.
func CanonicalTicket(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !ticketRE.MatchString(s) {
		return "", Errorf(EINVALID, "relatedTickets: invalid ticket %q (use #123 or owner/repo#123)", s)
	}
	return s, nil
}
