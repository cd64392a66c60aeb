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

// IdentityByName finds an identity by its name, with ENOTFOUND when there
// is none; a store passes one bound to its transaction.
type IdentityByName func(name string) (Identity, error)

// IdentityRef resolves a reference to an existing identity (@name, name,
// AGENT:name or human:login) given as argument field.
func IdentityRef(field, ref string, byName IdentityByName) (Identity, error) {
	name, kind, err := ParseOwner(ref)
	if err != nil {
		return Identity{}, Errorf(EINVALID, "%s: %q is not an identity (use @name or human:login)", field, ref)
	}
	id, err := byName(name)
	if ErrorCode(err) == ENOTFOUND || (err == nil && id.Kind != kind && kind != "") {
		return Identity{}, Errorf(ENOTFOUND, "%s: unknown identity %s", field, Identity{Name: name, Kind: kind}.Address())
	} else if err != nil {
		return Identity{}, err
	}
	id.Name = name
	return id, nil
}

// GrantPair resolves the two identities of a read grant; nobody is
// granted its own inbox.
func GrantPair(grantee, owner string, byName IdentityByName) (g, o Identity, err error) {
	if g, err = IdentityRef("grantee", grantee, byName); err != nil {
		return g, g, err
	}
	if o, err = IdentityRef("owner", owner, byName); err != nil {
		return g, o, err
	}
	if g.ID == o.ID {
		return g, o, Errorf(EINVALID, "%s already reads its own inbox", g.Address())
	}
	return g, o, nil
}

// Reader returns whose mailbox a reading call of me reads: me, or with of
// (an owner's name, of kind when the caller said which) that owner, if
// granted(owner) says me holds a read grant. An owner that does not exist
// and one that exists without a grant get the same answer.
func Reader(me Identity, of string, kind Kind, byName IdentityByName, granted func(owner Identity) (bool, error)) (Identity, error) {
	if of == "" {
		return me, nil
	}
	shown := Identity{Name: of, Kind: kind}
	if kind == "" {
		shown.Kind = KindAgent
	}
	owner, err := byName(of)
	if ErrorCode(err) == ENOTFOUND || (err == nil && kind != "" && owner.Kind != kind) {
		return Identity{}, NoReadGrant(shown.Address())
	} else if err != nil {
		return Identity{}, err
	}
	owner.Name = of
	if owner.ID == me.ID {
		return me, nil
	}
	ok, err := granted(owner)
	if err != nil {
		return Identity{}, err
	}
	if !ok {
		return Identity{}, NoReadGrant(owner.Address())
	}
	return owner, nil
}
