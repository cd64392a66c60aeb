package mailroom

import "strings"

// AddressKind tells what an address in `to` names.
type AddressKind int

// Address kinds.
const (
	AddrAgent AddressKind = iota + 1
	AddrHuman
	AddrRole
	AddrBroadcast
	AddrMe
)

// MaxRecipients is the most addresses one message may carry in `to`.
const MaxRecipients = 50

// Address is one parsed entry of `to`.
type Address struct {
	Kind AddressKind
	Name string // identity or role name; empty for broadcast and @me
}

// String returns the canonical form: @name, human:login, role:name or *.
func (a Address) String() string {
	switch a.Kind {
	case AddrAgent:
		return "@" + a.Name
	case AddrHuman:
		return "human:" + a.Name
	case AddrRole:
		return "role:" + a.Name
	case AddrBroadcast:
		return "*"
	case AddrMe:
		return "@me"
	}
	return ""
}

// ParseAddress parses one address: @name, name, AGENT:name, AGENT:@name,
// @me, human:login, role:name, * or AGENT:*.
func ParseAddress(s string) (Address, error) {
	raw := s
	s = strings.TrimSpace(s)
	if s == "" {
		return Address{}, Errorf(EINVALID, "to: empty address")
	}
	lower := strings.ToLower(s)
	switch {
	case s == "*" || lower == "agent:*":
		return Address{Kind: AddrBroadcast}, nil
	case strings.HasPrefix(lower, "human:"):
		name := s[len("human:"):]
		if err := ValidateName(name); err != nil {
			return Address{}, Errorf(EINVALID, "to: invalid human address %q: logins are lowercase [a-z0-9][a-z0-9._-]{0,63}", raw)
		}
		return Address{Kind: AddrHuman, Name: name}, nil
	case strings.HasPrefix(lower, "role:"):
		name := s[len("role:"):]
		if err := ValidateRole(name); err != nil {
			return Address{}, Errorf(EINVALID, "to: invalid role address %q: roles are lowercase [a-z0-9][a-z0-9._-]{0,127}", raw)
		}
		return Address{Kind: AddrRole, Name: name}, nil
	case strings.HasPrefix(lower, "agent:"):
		s = s[len("agent:"):]
	}
	s = strings.TrimPrefix(s, "@")
	if s == "me" {
		return Address{Kind: AddrMe}, nil
	}
	if err := ValidateName(s); err != nil {
		return Address{}, Errorf(EINVALID, "to: invalid address %q: use @name, human:login, role:name or *", raw)
	}
	return Address{Kind: AddrAgent, Name: s}, nil
}

// ParseAddresses parses a whole `to` list, rejecting empty and oversized
// lists and folding duplicates.
func ParseAddresses(list []string) ([]Address, error) {
	if len(list) == 0 {
		return nil, Errorf(EINVALID, "to must name at least one recipient")
	}
	if len(list) > MaxRecipients {
		return nil, Errorf(EINVALID, "to accepts at most %d addresses (got %d)", MaxRecipients, len(list))
	}
	out := make([]Address, 0, len(list))
	seen := make(map[Address]bool, len(list))
	for _, s := range list {
		a, err := ParseAddress(s)
		if err != nil {
			return nil, err
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// ParseIdentityRef parses a reference to an identity (as used by the `from`
// filter): @name, name, AGENT:name or human:login. It returns the name and,
// when the form says so, the kind ("" when either kind may match).
func ParseIdentityRef(s string) (name string, kind Kind, err error) {
	a, err := ParseAddress(s)
	if err != nil || (a.Kind != AddrAgent && a.Kind != AddrHuman && a.Kind != AddrMe) {
		return "", "", Errorf(EINVALID, "from: %q is not an identity (use @name or human:login)", s)
	}
	switch a.Kind {
	case AddrHuman:
		return a.Name, KindHuman, nil
	case AddrMe:
		return "", "", nil
	}
	return a.Name, KindAgent, nil
}
