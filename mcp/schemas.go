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

// Every byte below is read by a model in every session that lists the
// tools: descriptions say what an agent needs to pick the tool and no more,
// and output schemas give the shape without prose. size_test.go holds the
// whole list to its budget.

// rowFields are the fields of a message row as list_messages shows it;
// get_message's result is a row plus the body and edges. Output schemas
// name their fields as required and leave the types to the README: the
// shape costs a tenth of the bytes.
const rowFields = `"messageId", "subject", "from", "to", "priority", "sentAt", "readAt", "archivedAt", "threadId", "retracted"`

const rowSchema = `{"type": "object", "required": [` + rowFields + `]}`

// receipt is the output schema of a lifecycle call: messageId, status,
// durable and the one field it changed.
func receipt(field string) json.RawMessage {
	return json.RawMessage(`{"type": "object", "required": ["messageId", "status", "durable", "` + field + `"]}`)
}

// oneMessage is the input schema of a call on one message id.
const oneMessage = `{"type": "object", "additionalProperties": false, "properties": {"messageId": {"type": "string"}}, "required": ["messageId"]}`

var tools = []tool{
	{
		name:         "add_message",
		title:        "Send a message",
		stampsSender: true,
		description: "Send mail. to: @name, human:login, role:name (a queue its holders share; role:next-session-of-<agent> reaches that agent's next session), @me, or * (every agent). " +
			"The server stamps you as sender. inReplyTo threads a reply.",
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"to": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 50}]},
		"subject": {"type": "string", "minLength": 1, "maxLength": 200},
		"body": {"type": "string"},
		"originSessionId": {"type": "string", "description": "Default: this connection's session"},
		"relatedSessions": {"type": "array", "items": {"type": "string"}},
		"relatedTickets": {"type": "array", "items": {"type": "string"}, "description": "#123 or owner/repo#123"},
		"inReplyTo": {"type": "string"},
		"priority": {"enum": ["low", "normal", "high"]},
		"taggedConcepts": {"type": "array", "items": {"type": "string"}}
	},
	"required": ["to", "subject", "body"]
}`),
		output: json.RawMessage(`{"type": "object", "required": ["messageId", "threadId", "sentAt", "priority", "recipientCount", "status", "durable"]}`),
	},
	{
		name:  "list_messages",
		title: "List messages",
		description: "List mail newest first (with relatedTo: most shared concepts first), archived hidden. " +
			"Returns totalCount (with query at most 500: totalCountExact false), nextOffset (null on the last page), nextCursor and watermark (mark_read's through). Never marks read.",
		readOnly:   true,
		idempotent: true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"box": {"enum": ["inbox", "outbox", "all"], "description": "Default inbox"},
		"unreadOnly": {"type": "boolean"},
		"includeArchived": {"type": "boolean"},
		"archivedOnly": {"type": "boolean"},
		"threadId": {"type": "string"},
		"from": {"type": "string", "description": "@name, human:login or human:* (any human)"},
		"to": {"type": "string", "description": "An address it was sent to"},
		"via": {"enum": ["direct", "broadcast", "role"], "description": "How it reached you"},
		"priority": {"enum": ["low", "normal", "high"]},
		"query": {"type": "string", "description": "Full-text; every word must match; word* is a prefix"},
		"taggedConcepts": {"type": "array", "items": {"type": "string"}, "description": "Every one must match"},
		"relatedTo": {"type": "string", "description": "A MESSAGE: id: mail sharing its concepts"},
		"of": {"type": "string", "description": "@owner whose inbox you may read (read grant)"},
		"limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "Default 50"},
		"offset": {"type": "integer", "minimum": 0},
		"cursor": {"type": "string", "description": "nextCursor of the last page, instead of offset"}
	}
}`),
		output: json.RawMessage(`{"type": "object", "properties": {"messages": {"type": "array", "items": ` + rowSchema + `}},
	"required": ["messages", "totalCount", "totalCountExact", "nextOffset", "nextCursor", "watermark"]}`),
	},
	{
		name:        "get_message",
		title:       "Read one message",
		description: "Get one message with body, reply parent, sessions, tickets and concepts. Does not mark it read.",
		readOnly:    true,
		idempotent:  true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"messageId": {"type": "string"},
		"of": {"type": "string", "description": "@owner whose inbox you may read (read grant)"}
	},
	"required": ["messageId"]
}`),
		output: json.RawMessage(`{"type": "object", "required": [` + rowFields + `, "body", "inReplyTo", "originSessionId", "relatedSessions", "relatedTickets", "taggedConcepts"]}`),
	},
	{
		name:        "mailbox_status",
		title:       "Mailbox status",
		description: "Counts of your mailbox: unread (total, by route, from humans, by priority, per role), archived, oldest unread, watermark. Cheap.",
		readOnly:    true,
		idempotent:  true,
		input:       json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {}}`),
		output: json.RawMessage(`{"type": "object", "properties": {
		"unread": {"type": "object", "required": ["total", "direct", "broadcast", "role", "human", "byPriority"]},
		"roles": {"type": "array", "items": {"type": "object", "required": ["role", "unread"]}}
	}, "required": ["identity", "unread", "oldestUnreadAt", "archived", "watermark", "roles"]}`),
	},
	{
		name:  "mark_read",
		title: "Mark messages read",
		description: "Mark mail you received read: messageId (one id, or a list: one result per id), or all: true (every unread message delivered to you personally, one receipt; " +
			"includeRoles: true adds role-queue mail, through: a watermark stops there). Yours alone; the first readAt stays.",
		idempotent: true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"messageId": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
		"all": {"type": "boolean"},
		"through": {"type": "string"},
		"includeRoles": {"type": "boolean"}
	}
}`),
		output: json.RawMessage(`{"type": "object", "description": "One id: messageId, readAt. A list: results. all: snapshotAt, matchedCount, readCount, durableCount, failureCount, failures, withheldRoleCount.",
	"required": ["durable"]}`),
	},
	{
		name:        "mark_unread",
		title:       "Mark a message unread",
		description: "Mark mail you received unread again (a role message: for all its holders).",
		idempotent:  true,
		input:       json.RawMessage(oneMessage),
		output:      receipt("readAt"),
	},
	{
		name:        "archive_message",
		title:       "Archive a message",
		description: "Archive mail you received: hidden from list_messages unless includeArchived. Stays unread if unread.",
		idempotent:  true,
		input:       json.RawMessage(oneMessage),
		output:      receipt("archivedAt"),
	},
	{
		name:        "unarchive_message",
		title:       "Unarchive a message",
		description: "Undo archive_message.",
		idempotent:  true,
		input:       json.RawMessage(oneMessage),
		output:      receipt("archivedAt"),
	},
	{
		name:        "delete_message",
		title:       "Delete a message",
		description: "Delete a message from your inbox or outbox for good. Other recipients keep theirs.",
		destructive: true,
		idempotent:  true,
		input:       json.RawMessage(oneMessage),
		output:      receipt("deletedAt"),
	},
	{
		name:        "retract_message",
		title:       "Retract a message",
		description: "Take back a message you sent: its subject, body and extracted concepts are erased for every recipient.",
		destructive: true,
		idempotent:  true,
		input:       json.RawMessage(oneMessage),
		output:      receipt("retracted"),
	},
	{
		name:        "list_concepts",
		title:       "List concepts",
		description: "List the concepts of your 500 newest messages, most frequent first, with counts. Read that mail with list_messages({taggedConcepts: [id]}).",
		readOnly:    true,
		idempotent:  true,
		input:       json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "Default 100"}}}`),
		output:      json.RawMessage(`{"type": "object", "properties": {"concepts": {"type": "array", "items": {"type": "object", "required": ["id", "name", "count"]}}}, "required": ["concepts", "messagesCounted", "complete"]}`),
	},
	{
		name:        "wait_for_mail",
		title:       "Wait for mail",
		description: "Block until unread mail newer than `since` reaches your inbox; returns it oldest first (at most 50). Never marks read. timedOut: true when none came.",
		readOnly:    true,
		idempotent:  true,
		input: json.RawMessage(`{
	"type": "object",
	"additionalProperties": false,
	"properties": {
		"since": {"type": "string", "description": "A MESSAGE: id; default your newest."},
		"timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 60, "description": "Default 25."},
		"includeRoles": {"type": "boolean", "description": "Default true."}
	}
}`),
		output: json.RawMessage(`{
	"type": "object",
	"properties": {
		"messages": {"type": "array", "items": ` + rowSchema + `},
		"watermark": {"anyOf": [{"type": "string"}, {"type": "null"}]},
		"timedOut": {"type": "boolean"}
	},
	"required": ["messages", "watermark", "timedOut"]
}`),
	},
}

// ToolNames lists the tools the server offers, in tools/list order.
func ToolNames() []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	return names
}
