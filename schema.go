package mailroom

// CheckSchema reports whether a store whose newest applied migration is
// stored may be opened by a binary whose newest migration is known. A newer
// binary's migrations change what rows mean (a read-through mark, an index
// column), so an older binary opening such a store would show drained mail
// as unread or write rows the newer one misreads: it must refuse instead.
func CheckSchema(stored, known int) error {
	if stored > known {
		return Errorf(ECONFLICT, "store schema version %d is newer than this mailroom knows (%d): it was upgraded by a newer mailroom; run that version or a later one", stored, known)
	}
	return nil
}
