package mailroom

import "strings"

// Read delegation (SPEC section 10): a CAN_READ_INBOX_OF edge lets a grantee
// read an owner's inbox, never change it. The store answers every reading
// call that names an owner (ListFilter.Of, GetOf) as the owner would see it,
// after checking the grant; the changing tools take no owner at all, so a
// grant cannot reach them.

// NoReadGrant answers a reader without a grant for owner (shown as @name or
// human:login). An owner that does not exist gets the same answer.
func NoReadGrant(owner string) *Error {
	return Errorf(EFORBIDDEN, "No read grant for %s", owner)
}

// ParseOwner parses the `of` argument and the identities of a grant:
// @name, AGENT:name, human:login, or a bare name. It returns the name and
// the kind the form says ("" for a bare name, which may be either).
func ParseOwner(s string) (name string, kind Kind, err error) {
	a, err := ParseAddress(s)
	if err != nil || (a.Kind != AddrAgent && a.Kind != AddrHuman) {
		return "", "", Errorf(EINVALID, "of: %q is not an identity (use @name or human:login)", s)
	}
	t := strings.ToLower(strings.TrimSpace(s))
	switch {
	case a.Kind == AddrHuman:
		return a.Name, KindHuman, nil
	case strings.HasPrefix(t, "@") || strings.HasPrefix(t, "agent:"):
		return a.Name, KindAgent, nil
	}
	return a.Name, "", nil
}
