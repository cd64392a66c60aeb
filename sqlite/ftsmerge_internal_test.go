package sqlite

import (
	"slices"
	"testing"
)

// putVarint appends v as SQLite's varint (values below 2^56 here).
func putVarint(b []byte, v uint64) []byte {
	var tmp []byte
	tmp = append(tmp, byte(v&0x7f))
	for v >>= 7; v > 0; v >>= 7 {
		tmp = append(tmp, byte(v&0x7f)|0x80)
	}
	slices.Reverse(tmp)
	return append(b, tmp...)
}

// The structure record's decoder reads both of FTS5's formats: two
// levels, the second merging, segments of 3, 1 and 300 pages.
func TestDecodeFTSStructure(t *testing.T) {
	t.Parallel()
	for _, v2 := range []bool{false, true} {
		b := []byte{0, 0, 0, 7}
		if v2 {
			b = append(b, 0xff, 0, 0, 1)
		}
		for _, v := range []uint64{2, 3, 1 << 20} { // levels, segments, writes
			b = putVarint(b, v)
		}
		seg := func(id, first, last uint64) {
			b = putVarint(putVarint(putVarint(b, id), first), last)
			if v2 {
				for _, v := range []uint64{5, 9, 0, 0, 1000} {
					b = putVarint(b, v)
				}
			}
		}
		b = putVarint(putVarint(b, 0), 2) // level 0: no merge, 2 segments
		seg(1, 1, 3)
		seg(2, 1, 1)
		b = putVarint(putVarint(b, 1), 1) // level 1: merging 1, 1 segment
		seg(300, 1, 300)
		st, err := decodeFTSStructure(b)
		if err != nil {
			t.Fatalf("v2 %v: %v", v2, err)
		}
		if !slices.Equal(st.segs, []int{2, 1}) || !slices.Equal(st.merging, []int{0, 1}) ||
			!slices.Equal(st.pages[0], []int{3, 1}) || !slices.Equal(st.pages[1], []int{300}) {
			t.Errorf("v2 %v: decoded %+v", v2, st)
		}
		// FTS5's 'merge' takes level 1's unfinished merge (of 1) only if
		// it reads more segments than level 0 holds (2): with usermerge
		// 4 nothing is due; with 2, level 0 is.
		if st.mergeDue(4) || !st.mergeDue(2) || st.rebuildDue(1) {
			t.Errorf("v2 %v: due with usermerge 4 %v (want false), 2 %v (want true); a rebuild %v (want false)", v2, st.mergeDue(4), st.mergeDue(2), st.rebuildDue(1))
		}
		lone := ftsStructure{segs: []int{1, 3}, merging: []int{0, 2}, pages: [][]int{{1}, {5, 5, 5}}}
		if !lone.mergeDue(4) {
			t.Errorf("a merge of 2 unfinished above a level of 1 segment is not due")
		}
		if _, err := decodeFTSStructure(b[:len(b)-2]); err == nil {
			t.Errorf("v2 %v: a truncated record decoded", v2)
		}
	}
	// Rebuild: the rest against the largest.
	st := ftsStructure{segs: []int{2, 1}, merging: []int{0, 0}, pages: [][]int{{10, 15}, {200}}}
	if !st.rebuildDue(1) || st.rebuildDue(26) {
		t.Errorf("25 pages beside 200 make a rebuild due with a floor of 1, not of 26")
	}
	st.pages[0] = []int{10, 14}
	if st.rebuildDue(1) {
		t.Errorf("24 pages beside 200 made a rebuild due")
	}
}

// FuzzDecodeFTSStructure: the structure record comes from the database
// file, which another program or a damaged disk may have written; the
// merger decodes it in the background, so whatever the bytes it returns
// an error or a structure whose levels agree, and never panics.
func FuzzDecodeFTSStructure(f *testing.F) {
	for _, v2 := range []bool{false, true} {
		b := []byte{0, 0, 0, 7}
		if v2 {
			b = append(b, 0xff, 0, 0, 1)
		}
		b = putVarint(putVarint(putVarint(b, 2), 3), 1<<20)
		seg := func(id, first, last uint64) {
			b = putVarint(putVarint(putVarint(b, id), first), last)
			if v2 {
				for _, v := range []uint64{5, 9, 0, 0, 1000} {
					b = putVarint(b, v)
				}
			}
		}
		b = putVarint(putVarint(b, 0), 2)
		seg(1, 1, 3)
		seg(2, 1, 1)
		b = putVarint(putVarint(b, 1), 1)
		seg(300, 1, 300)
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 1, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeFTSStructure(b)
		if err != nil {
			return
		}
		if len(st.segs) != len(st.merging) || len(st.segs) != len(st.pages) {
			t.Fatalf("levels disagree: %d segment counts, %d merge counts, %d page lists", len(st.segs), len(st.merging), len(st.pages))
		}
		for l, k := range st.segs {
			if len(st.pages[l]) != k {
				t.Fatalf("level %d: %d segments, %d sizes", l, k, len(st.pages[l]))
			}
		}
		st.segments()
		st.mergeDue(ftsUsermerge)
		st.rebuildDue(ftsRebuildFloor)
	})
}
