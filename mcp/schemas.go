package mcp

import "encoding/json"

// tool is one tool's published definition. Schemas are written by hand, here
// and nowhere else; golden_test.go pins the exact tools/list output.
type tool struct {
	name, title, description string
	readOnly, idempotent     bool
	destructive              bool
	stampsSender             bool // refuses identity-override keys before anything else
	input, output            json.RawMessage
}

// declared returns the argument names the input schema declares.
func (t tool) declared() []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(t.input, &s); err != nil {
		panic("mcp: bad input schema for " + t.name + ": " + err.Error())
	}
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	return names
}

// rowProperties and rowRequired describe a message row as list_messages
// shows it; get_message's result is a row plus the body and edges.
const rowProperties = `		"messageId": {"type": "string"},
		"subject": {"type": "string"},
		"from": {"type": "string", "description": "Sender, stamped by the server: @name or human:login."},
		"to": {"type": "array", "items": {"type": "string"}, "description": "Resolved addresses: @name, human:login, role:name or *."},
		"priority": {"type": "string", "enum": ["low", "normal", "high"]},
		"sentAt": {"type": "string", "format": "date-time"},
		"readAt": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}], "description": "When you read it; null while unread. Always null on outbox rows."},
		"archivedAt": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
		"threadId": {"type": "string"},
		"retracted": {"type": "boolean"},
		"readBy": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Role-queue rows only: who read it for the role."}`

const rowRequired = `"messageId", "subject", "from", "to", "priority", "sentAt", "readAt", "archivedAt", "threadId", "retracted"`

const rowSchema = `{
	"type": "object",
	"properties": {` + rowProperties + `
	},
	"required": [` + rowRequired + `]
}`

var tools = []tool{
	{
		name:         "add_message",
		title:        "Send a message",
		stampsSender: true,
		description: "Send a message to agents, humans, role queues or everyone. The sender is stamped by the server from your connection; never pass it. " +
			"Addresses in `to`: `@name` (an agent), `human:login`, `role:name` (a queue that whoever holds the role reads, e.g. `role:next-session`, `role:next-session-of-<agent>` for your own successor), `@me`, or `*` for every agent. " +
			"Reply in a thread with `inReplyTo`. Returns the new messageId and threadId.",
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"to": {
			"description": "One address or a list of up to 50: @name, human:login, role:name, @me or *.",
			"anyOf": [
				{"type": "string", "minLength": 1},
				{"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 50}
			]
		},
		"subject": {"type": "string", "minLength": 1, "maxLength": 200, "description": "One line, at most 200 characters."},
		"body": {"type": "string", "description": "The message text (at most 64 KiB unless the server is configured otherwise)."},
		"originSessionId": {"type": "string", "description": "The session this message comes from (SESSION:<id> or <id>); defaults to this connection's session."},
		"relatedSessions": {"type": "array", "items": {"type": "string"}, "description": "Other sessions this message is about."},
		"relatedTickets": {"type": "array", "items": {"type": "string"}, "description": "Tickets: #123 or owner/repo#123."},
		"inReplyTo": {"type": "string", "description": "The MESSAGE: id you reply to; the reply joins its thread."},
		"priority": {"type": "string", "enum": ["low", "normal", "high"], "description": "Defaults to normal."},
		"taggedConcepts": {"type": "array", "items": {"type": "string"}, "description": "Concepts the message is about, as CONCEPT:<slug> ids or free text."}
	},
	"required": ["to", "subject", "body"]
}`),
		output: json.RawMessage(`{
	"type": "object",
	"properties": {
		"messageId": {"type": "string"},
		"threadId": {"type": "string"},
		"sentAt": {"type": "string", "format": "date-time"},
		"priority": {"type": "string", "enum": ["low", "normal", "high"]},
		"recipientCount": {"type": "integer", "description": "Delivery rows written; a role queue counts once."},
		"status": {"type": "string", "enum": ["sent"]},
		"durable": {"type": "boolean", "description": "False when the server runs on an in-memory store."}
	},
	"required": ["messageId", "threadId", "sentAt", "priority", "recipientCount", "status", "durable"]
}`),
	},
	{
		name:  "list_messages",
		title: "List messages",
		description: "List your messages, newest first, with the true totalCount and nextOffset for the next page (null on the last page). " +
			"Defaults: box inbox, archived hidden, 50 per page (at most 200). Filter by unreadOnly, threadId, from (@name), to (an address), " +
			"query (full-text over subject and body; any text is safe), or taggedConcepts (every one must match). " +
			"Listing never marks anything read. The returned watermark can be passed to mark_read as `through`.",
		readOnly:   true,
		idempotent: true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"box": {"type": "string", "enum": ["inbox", "outbox", "all"], "description": "inbox (default): mail to you and your roles; outbox: mail you sent; all: both."},
		"unreadOnly": {"type": "boolean", "description": "Only inbox messages you have not read."},
		"threadId": {"type": "string", "description": "Only this THREAD: id."},
		"from": {"type": "string", "description": "Only mail from this sender: @name or human:login."},
		"to": {"type": "string", "description": "Only mail addressed to this address: @name, human:login, role:name or *."},
		"query": {"type": "string", "description": "Full-text search over subject and body; every word must match; word* matches a prefix."},
		"taggedConcepts": {"type": "array", "items": {"type": "string"}, "description": "Only mail tagged with every one of these concepts (CONCEPT:<slug> ids or free text)."},
		"includeArchived": {"type": "boolean", "description": "Include messages you archived."},
		"limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "Page size, 1 to 200 (default 50)."},
		"offset": {"type": "integer", "minimum": 0, "description": "Rows to skip (default 0); use nextOffset from the previous page."}
	}
}`),
		output: json.RawMessage(`{
	"type": "object",
	"properties": {
		"messages": {"type": "array", "items": ` + rowSchema + `},
		"totalCount": {"type": "integer", "description": "How many messages match, across all pages."},
		"nextOffset": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "Offset of the next page; null on the last page."},
		"watermark": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "The newest message in your inbox when this list ran; mark_read({all: true, through: watermark}) marks only what arrived up to it."}
	},
	"required": ["messages", "totalCount", "nextOffset", "watermark"]
}`),
	},
	{
		name:        "get_message",
		title:       "Read one message",
		description: "Get one message with its body, thread, reply parent, sessions, tickets and concepts. Getting a message does not mark it read; call mark_read for that.",
		readOnly:    true,
		idempotent:  true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"messageId": {"type": "string", "description": "A MESSAGE: id."}
	},
	"required": ["messageId"]
}`),
		output: json.RawMessage(`{
	"type": "object",
	"properties": {` + rowProperties + `,
		"body": {"type": "string"},
		"inReplyTo": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "The message this replies to; null when none, or when you may not see it."},
		"originSessionId": {"type": "string"},
		"relatedSessions": {"type": "array", "items": {"type": "string"}},
		"relatedTickets": {"type": "array", "items": {"type": "string"}},
		"taggedConcepts": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}, "required": ["id", "name"]}}
	},
	"required": [` + rowRequired + `, "body", "inReplyTo", "originSessionId", "relatedSessions", "relatedTickets", "taggedConcepts"]
}`),
	},
	{
		name:        "archive_message",
		title:       "Archive a message",
		description: "Archive a message you received, hiding it from list_messages unless includeArchived is set. Archiving does not mark it read. Only recipients may archive.",
		idempotent:  true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"messageId": {"type": "string", "description": "A MESSAGE: id you received."}
	},
	"required": ["messageId"]
}`),
		output: json.RawMessage(`{
	"type": "object",
	"properties": {
		"messageId": {"type": "string"},
		"archivedAt": {"type": "string", "format": "date-time"},
		"status": {"type": "string", "enum": ["archived"]},
		"durable": {"type": "boolean"}
	},
	"required": ["messageId", "archivedAt", "status", "durable"]
}`),
	},
	{
		name:  "mark_read",
		title: "Mark messages read",
		description: "Mark mail you received as read. Three forms: `messageId: \"MESSAGE:...\"` marks one; `messageId: [ids]` marks each and returns one result per id (a bad id never fails the others); " +
			"`all: true` marks every unread, unarchived message delivered to you personally, in one call with no paging, and returns a compact receipt. " +
			"With `all`, role-queue mail is left for whoever handles the role unless `includeRoles: true`, and `through: <watermark from list_messages>` limits it to what you have seen. " +
			"Read state is yours alone: other recipients of a broadcast stay unread. Marking again keeps the first readAt.",
		idempotent: true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"messageId": {
			"description": "One MESSAGE: id, or a list of them. Give this or all, not both.",
			"anyOf": [
				{"type": "string", "minLength": 1},
				{"type": "array", "items": {"type": "string"}, "minItems": 1}
			]
		},
		"all": {"type": "boolean", "description": "Mark every unread message delivered to you personally. Give this or messageId, not both."},
		"through": {"type": "string", "description": "With all: only messages at or before this watermark (a MESSAGE: id from list_messages)."},
		"includeRoles": {"type": "boolean", "description": "With all: also mark unread role-queue mail (off by default, so handoffs stay for the role)."}
	}
}`),
		output: json.RawMessage(`{
	"type": "object",
	"description": "One id: messageId, readAt, status, durable. A list: results and durable. all: the drain receipt.",
	"properties": {
		"messageId": {"type": "string"},
		"readAt": {"type": "string", "format": "date-time"},
		"status": {"type": "string", "enum": ["read", "noop", "partial"]},
		"durable": {"type": "boolean"},
		"results": {
			"type": "array",
			"items": {
				"type": "object",
				"properties": {
					"messageId": {"type": "string"},
					"status": {"type": "string", "enum": ["read", "error"]},
					"readAt": {"type": "string", "format": "date-time"},
					"error": {"type": "string"}
				},
				"required": ["messageId", "status"]
			}
		},
		"snapshotAt": {"type": "string", "format": "date-time"},
		"matchedCount": {"type": "integer"},
		"readCount": {"type": "integer"},
		"durableCount": {"type": "integer", "description": "Reads that storage holds after commit, read back; 0 for an in-memory store."},
		"failureCount": {"type": "integer"},
		"failures": {"type": "array", "items": {"type": "object", "properties": {"messageId": {"type": "string"}, "error": {"type": "string"}}, "required": ["messageId", "error"]}},
		"withheldRoleCount": {"type": "integer", "description": "Unread role-queue messages left alone."},
		"note": {"type": "string"}
	}
}`),
	},
	{
		name:  "list_concepts",
		title: "List concepts",
		description: "List the concepts your mail is about (messages you sent or can read), most frequent first, with how many messages carry each. " +
			"Concepts come from an extractor that tags every message in the background, plus any taggedConcepts senders gave. " +
			"Pass an id to list_messages({taggedConcepts: [id]}) to read that mail.",
		readOnly:   true,
		idempotent: true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "At most this many concepts, 1 to 500 (default 100)."}
	}
}`),
		output: json.RawMessage(`{
	"type": "object",
	"properties": {
		"concepts": {
			"type": "array",
			"items": {
				"type": "object",
				"properties": {
					"id": {"type": "string", "description": "CONCEPT:<slug>"},
					"name": {"type": "string"},
					"count": {"type": "integer", "description": "Messages you can see that carry it."}
				},
				"required": ["id", "name", "count"]
			}
		}
	},
	"required": ["concepts"]
}`),
	},
}
