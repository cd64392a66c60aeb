package mailroom

import "context"

// Store is the mailbox's storage. Every method that acts for a caller reads
// the caller from ctx (see CallerFrom) and answers EUNAUTHORIZED without one.
//
// Visibility is the same for every method: a caller sees a message they sent,
// one delivered to them personally (direct or broadcast), and one delivered to
// a role they hold (explicitly granted or implicit) unless they sent it. For
// any other message, and for one that does not exist, methods return
// NotFound(id) and nothing else.
type Store interface {
	// EnsureAgent returns the agent identity name, registering it on first
	// use. It fails with ECONFLICT when name belongs to a human.
	EnsureAgent(ctx context.Context, name string) (Identity, error)
	// AddIdentity registers name with kind; it is idempotent for the same
	// kind and fails with ECONFLICT when name exists with the other kind.
	AddIdentity(ctx context.Context, name string, kind Kind) (Identity, error)
	// GrantRole grants role to the identity name (which must exist).
	GrantRole(ctx context.Context, name, role string) error
	// AddToken stores a token digest for an identity.
	AddToken(ctx context.Context, identityID int64, digest []byte) error
	// IdentityByToken finds the identity of a token digest with one indexed
	// lookup, or returns ENOTFOUND.
	IdentityByToken(ctx context.Context, digest []byte) (Identity, error)
	// Identities lists every identity, agents and humans, by name, with its
	// explicit role grants. It is for operators and needs no caller.
	Identities(ctx context.Context) ([]IdentityInfo, error)
	// Roles lists every role the store knows (granted, or addressed while
	// nobody held it) by name, with the identities granted it.
	Roles(ctx context.Context) ([]RoleInfo, error)
	// RevokeRole takes role away from the identity name. An unknown name is
	// ENOTFOUND; a role the identity does not hold is ENOTFOUND too.
	RevokeRole(ctx context.Context, name, role string) error

	// Send stores a message from the caller with all its edges and delivery
	// rows in one transaction. Unknown recipients, a broadcast reaching
	// nobody and a reply to an invisible message fail with nothing stored.
	Send(ctx context.Context, d Draft) (SendReceipt, error)
	// List answers one listing with indexed queries: the page, the true
	// total and the watermark (the newest message in the caller's inbox).
	List(ctx context.Context, f ListFilter) (Page, error)
	// Get returns one visible message with its edges.
	Get(ctx context.Context, messageID string) (Message, error)
	// GetOf is Get as the owner (a name, of kind ownerKind or "" for
	// either) would see it, for a caller holding a read grant on the
	// owner's inbox; it reads the owner's state and changes nothing.
	// Without a grant it answers NoReadGrant, for a message outside the
	// owner's inbox NotFound. List does the same for ListFilter.OfName.
	GetOf(ctx context.Context, owner string, ownerKind Kind, messageID string) (Message, error)
	// Archive archives the caller's delivery of a message. A sender who is
	// not a recipient gets NotRecipient.
	Archive(ctx context.Context, messageID string) (ArchiveReceipt, error)
	// MarkRead marks the caller's delivery of each id read, each through the
	// same single-id path; one failing id never fails the others. A read
	// keeps its first readAt.
	MarkRead(ctx context.Context, ids []string) []MarkResult
	// MarkAllRead snapshots the caller's unread, unarchived personal
	// deliveries (and role deliveries when asked) in one query, marks exactly
	// that snapshot by the single-id path's rules (a read keeps its first
	// readAt), and reads back what storage holds after commit.
	MarkAllRead(ctx context.Context, through string, includeRoles bool) (DrainReceipt, error)

	LifecycleStore

	ConceptStore
	TokenStore

	// InboxState summarises the caller's inbox cheaply (one indexed count
	// per branch): what a watcher compares after each change signal.
	InboxState(ctx context.Context) (InboxState, error)
	// NewMail returns the caller's unread, unarchived inbox messages
	// committed after since (a message the caller can see; "" for all),
	// oldest first, at most limit, with the watermark; role-queue mail only
	// when includeRoles. It never marks anything read. An invisible since
	// is NotFound(since).
	NewMail(ctx context.Context, since string, includeRoles bool, limit int) (NewMail, error)
	// Announce records, for the caller and a hook session key, that
	// messageIDs were announced, and returns those not announced to that
	// session before, in the order given. Ids the caller cannot see are
	// ignored.
	Announce(ctx context.Context, session string, messageIDs []string) ([]string, error)

	// ChangeSignal signals commits by any process or instance sharing the
	// database (see ChangeSignal); it is the only wake-up mechanism.
	ChangeSignal

	// Ping reports whether the store answers a query (GET /healthz).
	Ping(ctx context.Context) error
	// Durable reports whether writes outlive the process.
	Durable() bool
	// Close releases the store.
	Close() error
}

// LifecycleStore is the lifecycle side of a store (SPEC sections 9 and 10):
// undoing reads and archives, deleting, retracting, counting, retention and
// read grants. Visibility is the Store's; asking for the state a message is
// already in succeeds and changes nothing, except Delete (see lifecycle.go).
type LifecycleStore interface {
	// Unarchive clears the caller's archivedAt. Recipients only: a sender
	// who is not a recipient gets NotRecipient.
	Unarchive(ctx context.Context, messageID string) (UnarchiveReceipt, error)
	// MarkUnread clears the caller's readAt (for a role message, the shared
	// state of every holder). Recipients only, as Unarchive.
	MarkUnread(ctx context.Context, messageID string) (UnreadReceipt, error)
	// Delete removes the message from the caller's mailbox for good (inbox
	// and outbox): afterwards every method answers NotFound for it to the
	// caller. Other recipients and the sender are unaffected.
	Delete(ctx context.Context, messageID string) (DeleteReceipt, error)
	// Retract scrubs subject and body of a message the caller sent from
	// the message, the full-text index and its extracted concept tags, in
	// one transaction; edges, thread and read state stay. Anyone else who
	// can see it gets NotSender.
	Retract(ctx context.Context, messageID string) (RetractReceipt, error)
	// Status counts the caller's mailbox; each count equals the TotalCount
	// of the List call StatusQueries names for it.
	Status(ctx context.Context) (Status, error)
	// Purge removes messages sent before r.Before whose every delivery is
	// read or archived (any, with r.IncludeUnread) with all their edges,
	// index entries and concept tags. It is an operator's call and needs no
	// caller.
	Purge(ctx context.Context, r PurgeRequest) (PurgeReport, error)
	// GrantReadInbox lets grantee read owner's inbox (idempotent); both are
	// identity references (@name, name, human:login) that must exist.
	GrantReadInbox(ctx context.Context, grantee, owner string) error
	// RevokeReadInbox removes that grant; it reports whether one existed.
	RevokeReadInbox(ctx context.Context, grantee, owner string) (bool, error)
}
