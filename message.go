package mailroom

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on message text and edges.
const (
	MaxEdges           = 50        // entries in relatedSessions, relatedTickets or taggedConcepts
	MaxSubjectLen      = 200       // characters
	DefaultMaxBodySize = 64 * 1024 // bytes
)

// Priority of a message.
type Priority string

// Priorities.
const (
	PriorityLow    Priority = "low"
	PriorityNormal Priority = "normal"
	PriorityHigh   Priority = "high"
)

// ParsePriority validates a priority; "" means normal.
func ParsePriority(s string) (Priority, error) {
	switch Priority(s) {
	case "":
		return PriorityNormal, nil
	case PriorityLow, PriorityNormal, PriorityHigh:
		return Priority(s), nil
	}
	return "", Errorf(EINVALID, "priority must be one of low, normal, high (got %q)", s)
}

// Draft is a validated message to send. Sender and time are stamped by the
// store from the caller's identity.
type Draft struct {
	To              []Address
	Subject         string
	Body            string
	OriginSessionID string // SESSION:...; set by the transport when the caller gives none
	RelatedSessions []string
	RelatedTickets  []string
	InReplyTo       string
	Priority        Priority
	Concepts        []Concept
}

// Sender returns who sends d: the caller in ctx, once d is complete
// enough to store (the transport has set its origin session). Every
// store's send paths start here.
func Sender(ctx context.Context, d Draft) (Identity, error) {
	me, err := CallerFrom(ctx)
	if err != nil {
		return Identity{}, err
	}
	if d.OriginSessionID == "" {
		return Identity{}, Errorf(EINVALID, "originSessionId is required")
	}
	return me, nil
}

// SendInput is add_message's arguments as decoded by a transport.
type SendInput struct {
	To              []string
	Subject         string
	Body            string
	OriginSessionID string
	RelatedSessions []string
	RelatedTickets  []string
	InReplyTo       string
	Priority        string
	TaggedConcepts  []string
}

// Draft validates in and returns the draft to store. maxBody is the body
// limit in bytes (DefaultMaxBodySize when 0).
func (in SendInput) Draft(maxBody int) (Draft, error) {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodySize
	}
	var d Draft
	var err error
	if d.To, err = ParseAddresses(in.To); err != nil {
		return Draft{}, err
	}
	if strings.TrimSpace(in.Subject) == "" {
		return Draft{}, Errorf(EINVALID, "subject must not be empty")
	}
	if n := utf8.RuneCountInString(in.Subject); n > MaxSubjectLen {
		return Draft{}, Errorf(EINVALID, "subject is %d characters; the limit is %d", n, MaxSubjectLen)
	}
	if len(in.Body) > maxBody {
		return Draft{}, Errorf(EINVALID, "body is %d bytes; the limit is %d", len(in.Body), maxBody)
	}
	if !utf8.ValidString(in.Subject) || !utf8.ValidString(in.Body) {
		return Draft{}, Errorf(EINVALID, "subject and body must be valid UTF-8")
	}
	if err := CheckSubject(in.Subject); err != nil {
		return Draft{}, err
	}
	d.Subject, d.Body = in.Subject, in.Body
	if in.OriginSessionID != "" {
		if d.OriginSessionID, err = CanonicalSession("originSessionId", in.OriginSessionID); err != nil {
			return Draft{}, err
		}
	}
	for _, l := range []struct {
		field string
		n     int
	}{{"relatedSessions", len(in.RelatedSessions)}, {"relatedTickets", len(in.RelatedTickets)}, {"taggedConcepts", len(in.TaggedConcepts)}} {
		if l.n > MaxEdges {
			return Draft{}, Errorf(EINVALID, "%s accepts at most %d entries (got %d)", l.field, MaxEdges, l.n)
		}
	}
	for _, s := range in.RelatedSessions {
		id, err := CanonicalSession("relatedSessions", s)
		if err != nil {
			return Draft{}, err
		}
		d.RelatedSessions = appendUnique(d.RelatedSessions, id)
	}
	for _, s := range in.RelatedTickets {
		t, err := CanonicalTicket(s)
		if err != nil {
			return Draft{}, err
		}
		d.RelatedTickets = appendUnique(d.RelatedTickets, t)
	}
	if in.InReplyTo != "" {
		if err := ValidateMessageID("inReplyTo", in.InReplyTo); err != nil {
			return Draft{}, err
		}
		d.InReplyTo = in.InReplyTo
	}
	if d.Priority, err = ParsePriority(in.Priority); err != nil {
		return Draft{}, err
	}
	if d.Concepts, err = CanonicalConcepts(in.TaggedConcepts); err != nil {
		return Draft{}, err
	}
	return d, nil
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// ValidateMessageID checks that id has the MESSAGE: form. A malformed id is
// answered like an unknown one, so callers learn nothing more from it.
func ValidateMessageID(field, id string) error {
	if id == "" {
		return Errorf(EINVALID, "%s must not be empty", field)
	}
	if !strings.HasPrefix(id, MessagePrefix) || len(id) > 200 {
		return NotFound(id)
	}
	return nil
}

// SendReceipt is add_message's result.
type SendReceipt struct {
	MessageID      string    `json:"messageId"`
	ThreadID       string    `json:"threadId"`
	SentAt         time.Time `json:"sentAt"`
	Priority       Priority  `json:"priority"`
	RecipientCount int       `json:"recipientCount"`
	Status         string    `json:"status"`
	Durable        bool      `json:"durable"`
}

// Row is one message as a listing shows it to the caller. ReadAt and
// ArchivedAt are the caller's own state.
type Row struct {
	MessageID  string     `json:"messageId"`
	Subject    string     `json:"subject"`
	From       string     `json:"from"`
	To         []string   `json:"to"`
	Priority   Priority   `json:"priority"`
	SentAt     time.Time  `json:"sentAt"`
	ReadAt     *time.Time `json:"readAt"`
	ArchivedAt *time.Time `json:"archivedAt"`
	ThreadID   string     `json:"threadId"`
	Retracted  bool       `json:"retracted"`
	ReadBy     *string    `json:"readBy,omitempty"` // role-queue rows: who read it
}

// Message is get_message's result: the row plus the body and edges.
type Message struct {
	Row
	Body            string    `json:"body"`
	InReplyTo       *string   `json:"inReplyTo"`
	OriginSessionID string    `json:"originSessionId"`
	RelatedSessions []string  `json:"relatedSessions"`
	RelatedTickets  []string  `json:"relatedTickets"`
	TaggedConcepts  []Concept `json:"taggedConcepts"`
}

// Box selects which side of the mailbox a listing reads.
type Box string

// Boxes.
const (
	BoxInbox  Box = "inbox"
	BoxOutbox Box = "outbox"
	BoxAll    Box = "all"
)

// Listing limits.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// ListInput is list_messages' arguments as decoded by a transport; nil
// pointers are absent arguments.
type ListInput struct {
	Box             string
	UnreadOnly      bool
	ThreadID        string
	From            string
	To              string
	Query           string
	TaggedConcepts  []string
	IncludeArchived bool
	Limit           *int
	Offset          *int
	// Section 9 and 10 filters.
	ArchivedOnly bool
	Via          string // direct, broadcast or role
	Priority     string
	Of           string  // read this owner's inbox under a read grant
	RelatedTo    string  // messages sharing concepts with this one
	Cursor       *string // a nextCursor; instead of Offset
}

// ListFilter is a validated listing request.
type ListFilter struct {
	Box             Box
	UnreadOnly      bool
	ThreadID        string
	FromName        string // identity name; "" for any
	FromKind        Kind   // "" when either kind may match
	FromMe          bool
	To              string       // canonical address; "" for any
	Search          []SearchTerm // full-text words, every one must match; nil for none
	QueryEmpty      bool         // the user's query has no searchable words: matches nothing
	Concepts        []string
	IncludeArchived bool
	Limit, Offset   int
	ArchivedOnly    bool     // only archived inbox mail
	Via             string   // "" or direct, broadcast, role
	Priority        Priority // "" for any
	FromHuman       bool     // from: human:* (any human)
	OfName          string   // the owner whose inbox a grantee reads; "" for the caller
	OfKind          Kind
	RelatedTo       string // a MESSAGE: id; rank by shared concepts
	// Before, from a cursor, keeps only messages earlier than this
	// position in the store's commit order; 0 for none.
	Before int64
	// SearchBounds bound a full-text listing; the zero value means
	// SearchScan and SearchCount (tests set smaller ones).
	SearchBounds SearchBounds
}

// Filter validates in with the default limits.
func (in ListInput) Filter() (ListFilter, error) { return in.FilterWith(Limits{}) }

// FilterWith validates in against the limits l.
func (in ListInput) FilterWith(l Limits) (ListFilter, error) {
	f := ListFilter{
		Box:             Box(in.Box),
		UnreadOnly:      in.UnreadOnly,
		IncludeArchived: in.IncludeArchived,
		Limit:           DefaultLimit,
	}
	switch f.Box {
	case "":
		f.Box = BoxInbox
	case BoxInbox, BoxOutbox, BoxAll:
	default:
		return ListFilter{}, Errorf(EINVALID, "box must be one of inbox, outbox, all (got %q)", in.Box)
	}
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > MaxLimit {
			return ListFilter{}, Errorf(EINVALID, "limit must be between 1 and %d (got %d)", MaxLimit, *in.Limit)
		}
		f.Limit = *in.Limit
	}
	if in.Offset != nil {
		if *in.Offset < 0 {
			return ListFilter{}, Errorf(EINVALID, "offset must be 0 or more (got %d)", *in.Offset)
		}
		f.Offset = *in.Offset
	}
	if in.Cursor != nil {
		if in.Offset != nil {
			return ListFilter{}, Errorf(EINVALID, "give cursor or offset, not both")
		}
		pos, err := ParseCursor(*in.Cursor)
		if err != nil {
			return ListFilter{}, err
		}
		f.Before = pos
	}
	if in.ThreadID != "" {
		if !strings.HasPrefix(in.ThreadID, ThreadPrefix) {
			return ListFilter{}, Errorf(EINVALID, "threadId must be a THREAD: id (got %q)", in.ThreadID)
		}
		f.ThreadID = in.ThreadID
	}
	if strings.EqualFold(strings.TrimSpace(in.From), AnyHuman) {
		f.FromHuman = true
	} else if in.From != "" {
		name, kind, err := ParseIdentityRef(in.From)
		if err != nil {
			return ListFilter{}, err
		}
		f.FromName, f.FromKind, f.FromMe = name, kind, name == ""
	}
	if in.To != "" {
		a, err := ParseAddress(in.To)
		if err != nil {
			return ListFilter{}, Errorf(EINVALID, "to: invalid address %q: use @name, human:login, role:name or *", in.To)
		}
		f.To = a.String()
	}
	if err := l.CheckQuery(in.Query); err != nil {
		return ListFilter{}, err
	}
	if strings.TrimSpace(in.Query) != "" {
		f.Search = SearchTerms(in.Query)
		f.QueryEmpty = len(f.Search) == 0
	}
	if in.ArchivedOnly {
		f.ArchivedOnly, f.IncludeArchived = true, true
	}
	switch in.Via {
	case "", ViaDirect, ViaBroadcast, ViaRole:
		f.Via = in.Via
	default:
		return ListFilter{}, Errorf(EINVALID, "via must be one of direct, broadcast, role (got %q)", in.Via)
	}
	if in.Priority != "" {
		p, err := ParsePriority(in.Priority)
		if err != nil {
			return ListFilter{}, err
		}
		f.Priority = p
	}
	if in.Of != "" {
		if f.Box != BoxInbox {
			return ListFilter{}, Errorf(EINVALID, "of reads another identity's inbox only: box must be inbox (got %q)", in.Box)
		}
		name, kind, err := ParseOwner(in.Of)
		if err != nil {
			return ListFilter{}, err
		}
		f.OfName, f.OfKind = name, kind
	}
	if in.RelatedTo != "" {
		if err := ValidateMessageID("relatedTo", in.RelatedTo); err != nil {
			return ListFilter{}, err
		}
		f.RelatedTo = in.RelatedTo
		if in.Cursor != nil {
			return ListFilter{}, Errorf(EINVALID, "cursor does not apply with relatedTo (ranked by shared concepts); use offset")
		}
	}
	if n := len(in.TaggedConcepts); n > MaxConceptFilter {
		return ListFilter{}, Errorf(EINVALID, "taggedConcepts accepts at most %d entries (got %d)", MaxConceptFilter, n)
	}
	for _, t := range in.TaggedConcepts {
		c, err := CanonicalConcept(t)
		if err != nil {
			return ListFilter{}, err
		}
		f.Concepts = appendUnique(f.Concepts, c.ID)
	}
	return f, nil
}

// Page is list_messages' result.
type Page struct {
	Messages   []Row `json:"messages"`
	TotalCount int   `json:"totalCount"`
	// TotalCountExact is false when a search stopped counting (SearchScan,
	// SearchCount): TotalCount is then a lower bound.
	TotalCountExact bool    `json:"totalCountExact"`
	NextOffset      *int    `json:"nextOffset"`
	NextCursor      *string `json:"nextCursor"`
	Watermark       *string `json:"watermark"`
}

// cursorPrefix versions the cursor format.
const cursorPrefix = "c1."

// Cursor returns the opaque cursor of the page that continues after the
// message at pos in the store's commit order.
func Cursor(pos int64) string {
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(strconv.AppendInt(nil, pos, 10))
}

// ParseCursor reads a cursor made by Cursor.
func ParseCursor(c string) (int64, error) {
	bad := Errorf(EINVALID, "cursor must be a nextCursor from list_messages (got %q)", truncate(c, 40))
	rest, ok := strings.CutPrefix(c, cursorPrefix)
	if !ok {
		return 0, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return 0, bad
	}
	pos, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || pos < 1 {
		return 0, bad
	}
	return pos, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// NextOffsetFor returns the offset of the page after one that started at
// offset and held n rows of total, or nil on the last page.
func NextOffsetFor(offset, n, total int) *int {
	if next := offset + n; n > 0 && next < total {
		return &next
	}
	return nil
}

// SearchTerm is one word of a full-text query. Each store renders terms in
// its own search dialect (sqlite/ as FTS5 phrases, postgres/ as a tsquery),
// always as plain text: no word is ever read as an operator.
type SearchTerm struct {
	Word   string // as typed, without a trailing *
	Prefix bool   // the word ended in *: match words starting with it
}

// SearchTerms splits any user text into the words of a full-text query:
// whitespace separates words, control characters and invalid bytes count as
// whitespace, a trailing * asks for a prefix match, and a word without a
// letter or digit is dropped. Every returned word must match.
func SearchTerms(text string) []SearchTerm {
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, text)
	var out []SearchTerm
	for _, w := range strings.Fields(text) {
		prefix := strings.HasSuffix(w, "*")
		w = strings.TrimRight(w, "*")
		if !hasWordChar(w) {
			continue
		}
		out = append(out, SearchTerm{Word: w, Prefix: prefix})
	}
	return out
}

func hasWordChar(s string) bool {
	for _, r := range s {
		if ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') || r > 127 {
			return true
		}
	}
	return false
}

// ArchiveReceipt is archive_message's result.
type ArchiveReceipt struct {
	MessageID  string    `json:"messageId"`
	ArchivedAt time.Time `json:"archivedAt"`
	Status     string    `json:"status"`
	Durable    bool      `json:"durable"`
}

// NotRecipient answers a sender who tries a recipient-only operation.
func NotRecipient(messageID string) *Error {
	return Errorf(EFORBIDDEN, "Not a recipient: %s", messageID)
}

// BulkSend is Copies copies of Draft sent by From: one entry of a store's
// bulk path (seeding benchmarks and load tests), which no transport reaches.
type BulkSend struct {
	From   Identity
	Draft  Draft
	Copies int
	// Sent, when set, is told the first copy's message id once it is
	// written (by a bulk path that takes entries one at a time).
	Sent func(messageID string)
}
