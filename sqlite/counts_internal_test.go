package sqlite

import "testing"

// ownSuccessor is a constant only so the candidate statements can be.
func TestOwnSuccessorIsTheCallersRole(t *testing.T) {
	t.Parallel()
	if ownSuccessor != ownSuccessorRole("?1") {
		t.Fatalf("ownSuccessor %s, want %s", ownSuccessor, ownSuccessorRole("?1"))
	}
}
