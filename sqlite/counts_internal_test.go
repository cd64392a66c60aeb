package sqlite

import (
	"strings"
	"testing"
)

// ownSuccessor is a constant only so the candidate statements can be.
func TestOwnSuccessorIsTheCallersRole(t *testing.T) {
	t.Parallel()
	if ownSuccessor != ownSuccessorRole("?1") {
		t.Fatalf("ownSuccessor %s, want %s", ownSuccessor, ownSuccessorRole("?1"))
	}
}

// The search's shortcuts rewrite generated branches by their text
// (perRole's split, List's one-role search dropping olderRoleDelivery);
// a rewrite that no longer finds its text would leave the branch whole:
// right, only slower, and no listing would show it.
func TestBranchRewritesFindTheirText(t *testing.T) {
	t.Parallel()
	role := inboxBranches(unarchivedD+` AND d.message_seq = w.seq`, ` AND m.seq = w.seq`)[1]
	if !strings.Contains(role, `d.role IN (SELECT value FROM json_each(?2))`) {
		t.Fatalf("perRole would not split the role branch:\n%s", role)
	}
	one := perRole(role, 1)
	if len(one) != 1 || !strings.Contains(one[0], olderRoleDelivery()) {
		t.Fatalf("a one-role search would keep the second-queue test:\n%v", one)
	}
}
