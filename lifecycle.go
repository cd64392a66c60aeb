package mailroom

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The lifecycle operations of SPEC section 9. Each acts for the caller only
// (a role message's read state is the one shared exception) and answers
// {messageId, status, durable} plus the field it changed.
//
// Asking for the state a message is already in is not an error, as with
// mark_read and archive_message: unarchiving mail that is not archived,
// marking unread mail unread and retracting a retracted message succeed and
// change nothing. Deleting is the exception by nature: deleted mail does not
// exist for the caller any more, so a second delete answers NotFound.

// UnarchiveReceipt is unarchive_message's result.
type UnarchiveReceipt struct {
	MessageID  string     `json:"messageId"`
	ArchivedAt *time.Time `json:"archivedAt"` // always null
	Status     string     `json:"status"`     // "unarchived"
	Durable    bool       `json:"durable"`
}

// UnreadReceipt is mark_unread's result.
type UnreadReceipt struct {
	MessageID string     `json:"messageId"`
	ReadAt    *time.Time `json:"readAt"` // always null
	Status    string     `json:"status"` // "unread"
	Durable   bool       `json:"durable"`
}

// DeleteReceipt is delete_message's result.
type DeleteReceipt struct {
	MessageID string    `json:"messageId"`
	DeletedAt time.Time `json:"deletedAt"`
	Status    string    `json:"status"` // "deleted"
	Durable   bool      `json:"durable"`
}

// RetractReceipt is retract_message's result.
type RetractReceipt struct {
	MessageID string `json:"messageId"`
	Retracted bool   `json:"retracted"` // always true
	Status    string `json:"status"`    // "retracted"
	Durable   bool   `json:"durable"`
}

// NotSender answers anyone but the sender who tries to retract a message
// they can see.
func NotSender(messageID string) *Error {
	return Errorf(EFORBIDDEN, "Not the sender: %s", messageID)
}

// Status is mailbox_status' result. Every count equals the totalCount of
// one list_messages call (see StatusQueries).
type Status struct {
	Identity       string       `json:"identity"`
	Unread         UnreadCounts `json:"unread"`
	OldestUnreadAt *time.Time   `json:"oldestUnreadAt"`
	Archived       int          `json:"archived"`
	Watermark      *string      `json:"watermark"`
	Roles          []RoleCount  `json:"roles"`
}

// UnreadCounts splits the caller's unread inbox. Direct, Broadcast and Role
// say how the message reached the caller and sum to Total; Human counts
// unread mail sent by humans, whichever way it came.
type UnreadCounts struct {
	Total      int            `json:"total"`
	Direct     int            `json:"direct"`
	Broadcast  int            `json:"broadcast"`
	Role       int            `json:"role"`
	Human      int            `json:"human"`
	ByPriority PriorityCounts `json:"byPriority"`
}

// PriorityCounts are unread counts by priority.
type PriorityCounts struct {
	High   int `json:"high"`
	Normal int `json:"normal"`
	Low    int `json:"low"`
}

// RoleCount is one role the caller holds and the unread mail waiting for
// the caller in its queue (reached through a role, addressed to this one).
type RoleCount struct {
	Role   string `json:"role"` // role:name
	Unread int    `json:"unread"`
}

// StatusQueries returns, for each count of Status, the list_messages
// arguments whose totalCount it equals. It is the contract the status counts
// are tested against, written once.
func StatusQueries(roles []string) map[string]ListInput {
	q := map[string]ListInput{
		"unread.total":             {UnreadOnly: true},
		"unread.direct":            {UnreadOnly: true, Via: "direct"},
		"unread.broadcast":         {UnreadOnly: true, Via: "broadcast"},
		"unread.role":              {UnreadOnly: true, Via: "role"},
		"unread.human":             {UnreadOnly: true, From: AnyHuman},
		"unread.byPriority.high":   {UnreadOnly: true, Priority: "high"},
		"unread.byPriority.normal": {UnreadOnly: true, Priority: "normal"},
		"unread.byPriority.low":    {UnreadOnly: true, Priority: "low"},
		"archived":                 {ArchivedOnly: true},
	}
	for _, r := range roles {
		q["roles."+r] = ListInput{UnreadOnly: true, Via: ViaRole, To: r}
	}
	return q
}

// AnyHuman is the from filter that matches mail from any human.
const AnyHuman = "human:*"

// Vias a listing can filter by: how a message reached the caller.
const (
	ViaDirect    = "direct"
	ViaBroadcast = "broadcast"
	ViaRole      = "role"
)

// ViaMailboxes reports which of a reader's mailboxes can hold mail that
// reached them by the route via ("" for any): only role queues get mail
// via a role, and all of theirs comes that way, so a store need not read
// the others' deliveries, nor test a role delivery's route.
func ViaMailboxes(via string) (personal, roleQueues bool) {
	switch via {
	case ViaRole:
		return false, true
	case ViaDirect, ViaBroadcast:
		return true, false
	}
	return true, true
}

// OwnersDirectMail reports whether f lists mail by its owner's own address
// (to: @me, or the address spelled out) and returns the filter its inbox
// side answers: the owner's direct mail, with no recipient test. A
// personal delivery comes direct exactly when its message was addressed to
// its recipient (a broadcast skips whoever it also names), and a role
// queue shows its holder nothing addressed to them (they got it
// personally). Outbox rows keep f's to.
func (f ListFilter) OwnersDirectMail(owner Identity) (ListFilter, bool) {
	if f.Box == BoxOutbox || (f.To != "@me" && f.To != owner.Address()) || (f.Via != "" && f.Via != ViaDirect) {
		return f, false
	}
	f.To, f.Via = "", ViaDirect
	return f, true
}

// PurgeRequest asks to remove old mail for good (mailroom purge).
type PurgeRequest struct {
	Before        time.Time // messages sent before this
	DryRun        bool      // count, remove nothing
	IncludeUnread bool      // also messages with an unread, unarchived delivery
}

// PurgeReport says what a purge removed, or would remove.
type PurgeReport struct {
	Before     time.Time
	DryRun     bool
	Messages   int // removed (or that would be)
	Deliveries int
	Concepts   int // TAGGED_CONCEPT edges
	Kept       int // old enough, kept for an unread delivery
}

// ParseAge parses a retention age: a whole number of days (90d) or weeks
// (2w), or a Go duration (12h, 90m). It must be positive.
func ParseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	bad := Errorf(EINVALID, "--older-than must be a positive age such as 90d, 2w or 12h (got %q)", s)
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		v, err := strconv.Atoi(n)
		if err != nil {
			return 0, bad
		}
		d = time.Duration(v) * 24 * time.Hour
	} else if n, ok := strings.CutSuffix(s, "w"); ok {
		v, err := strconv.Atoi(n)
		if err != nil {
			return 0, bad
		}
		d = time.Duration(v) * 7 * 24 * time.Hour
	} else {
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, bad
		}
		d = v
	}
	if d <= 0 {
		return 0, bad
	}
	return d, nil
}

// String renders the report as the purge command prints it.
func (r PurgeReport) String() string {
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	s := fmt.Sprintf("%s %d messages sent before %s (%d deliveries, %d concept tags)",
		verb, r.Messages, r.Before.UTC().Format(time.RFC3339), r.Deliveries, r.Concepts)
	if r.Kept > 0 {
		s += fmt.Sprintf("; kept %d old messages that are still unread (--include-unread removes them)", r.Kept)
	}
	return s
}
