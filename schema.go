package mailroom

import (
	"path"
	"strconv"
	"strings"
)

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

// MigrationVersions is the version of each migration file name (the number
// before its first "_", as in 0012_read_mark.sql), for names in order. It
// refuses a name without one, two names with one version (two changes that
// each added the next migration) and a gap, which would otherwise apply one
// of the pair and skip the other on a store that already had it.
func MigrationVersions(names []string) ([]int, error) {
	versions := make([]int, len(names))
	for i, name := range names {
		base := path.Base(name)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, Errorf(EINTERNAL, "migration %s: no version number before its first _", base)
		}
		if want := i + 1; v != want {
			if i > 0 && v == versions[i-1] {
				return nil, Errorf(EINTERNAL, "migrations %s and %s share version %d", path.Base(names[i-1]), base, v)
			}
			return nil, Errorf(EINTERNAL, "migration %s: version %d where %d comes next", base, v, want)
		}
		versions[i] = v
	}
	return versions, nil
}
