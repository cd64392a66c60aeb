package concepts

// stem returns the Porter stem of a lowercase ASCII word (M. F. Porter, "An
// algorithm for suffix stripping", 1980, following the author's reference C
// implementation). Words that are short or not plain lowercase ASCII are
// returned unchanged: stemming rules for English do not apply to them.
func stem(w string) string {
	if len(w) <= 2 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	s := porter{b: []byte(w), k: len(w) - 1}
	s.step1ab()
	if s.k > 0 {
		s.step1c()
		s.step2()
		s.step3()
		s.step4()
		s.step5()
	}
	return string(s.b[:s.k+1])
}

// porter holds the word being stemmed: b[0..k] is the current word, and j
// marks the end of the stem when a suffix has been matched by ends.
type porter struct {
	b    []byte
	k, j int
}

// cons reports whether b[i] is a consonant.
func (p *porter) cons(i int) bool {
	switch p.b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !p.cons(i-1)
	}
	return true
}

// m measures the number of consonant-vowel sequences in b[0..j].
func (p *porter) m() int {
	n, i := 0, 0
	for {
		if i > p.j {
			return n
		}
		if !p.cons(i) {
			break
		}
		i++
	}
	i++
	for {
		for {
			if i > p.j {
				return n
			}
			if p.cons(i) {
				break
			}
			i++
		}
		i++
		n++
		for {
			if i > p.j {
				return n
			}
			if !p.cons(i) {
				break
			}
			i++
		}
		i++
	}
}

// vowelInStem reports whether b[0..j] contains a vowel.
func (p *porter) vowelInStem() bool {
	for i := 0; i <= p.j; i++ {
		if !p.cons(i) {
			return true
		}
	}
	return false
}

// doubleC reports whether b[i-1..i] is a double consonant.
func (p *porter) doubleC(i int) bool {
	return i >= 1 && p.b[i] == p.b[i-1] && p.cons(i)
}

// cvc reports whether b[i-2..i] is consonant-vowel-consonant with the last
// consonant not w, x or y (so hop -> hope-like restoration applies).
func (p *porter) cvc(i int) bool {
	if i < 2 || !p.cons(i) || p.cons(i-1) || !p.cons(i-2) {
		return false
	}
	switch p.b[i] {
	case 'w', 'x', 'y':
		return false
	}
	return true
}

// ends reports whether b[0..k] ends with s, setting j to the end of the stem.
func (p *porter) ends(s string) bool {
	n := len(s)
	if n > p.k+1 || string(p.b[p.k-n+1:p.k+1]) != s {
		return false
	}
	p.j = p.k - n
	return true
}

// setTo replaces b[j+1..k] with s.
func (p *porter) setTo(s string) {
	p.b = append(p.b[:p.j+1], s...)
	p.k = p.j + len(s)
}

// r replaces the suffix with s when the stem's measure is positive.
func (p *porter) r(s string) {
	if p.m() > 0 {
		p.setTo(s)
	}
}

// step1ab removes plurals and -ed or -ing.
func (p *porter) step1ab() {
	if p.b[p.k] == 's' {
		switch {
		case p.ends("sses"):
			p.k -= 2
		case p.ends("ies"):
			p.setTo("i")
		case p.b[p.k-1] != 's':
			p.k--
		}
	}
	if p.ends("eed") {
		if p.m() > 0 {
			p.k--
		}
		return
	}
	if (p.ends("ed") || p.ends("ing")) && p.vowelInStem() {
		p.k = p.j
		switch {
		case p.ends("at"):
			p.setTo("ate")
		case p.ends("bl"):
			p.setTo("ble")
		case p.ends("iz"):
			p.setTo("ize")
		case p.doubleC(p.k):
			p.k--
			switch p.b[p.k] {
			case 'l', 's', 'z':
				p.k++
			}
		default:
			p.j = p.k
			if p.m() == 1 && p.cvc(p.k) {
				p.setTo("e")
			}
		}
	}
}

// step1c turns a terminal y into i when there is another vowel in the stem.
func (p *porter) step1c() {
	if p.ends("y") && p.vowelInStem() {
		p.b[p.k] = 'i'
	}
}

// step2 maps double suffixes to single ones (-ization -> -ize).
func (p *porter) step2() {
	if p.k < 1 {
		return
	}
	var table []string
	switch p.b[p.k-1] {
	case 'a':
		table = []string{"ational", "ate", "tional", "tion"}
	case 'c':
		table = []string{"enci", "ence", "anci", "ance"}
	case 'e':
		table = []string{"izer", "ize"}
	case 'l':
		table = []string{"bli", "ble", "alli", "al", "entli", "ent", "eli", "e", "ousli", "ous"}
	case 'o':
		table = []string{"ization", "ize", "ation", "ate", "ator", "ate"}
	case 's':
		table = []string{"alism", "al", "iveness", "ive", "fulness", "ful", "ousness", "ous"}
	case 't':
		table = []string{"aliti", "al", "iviti", "ive", "biliti", "ble"}
	case 'g':
		table = []string{"logi", "log"}
	}
	p.replaceFirst(table)
}

// step3 deals with -ic-, -full, -ness and similar.
func (p *porter) step3() {
	var table []string
	switch p.b[p.k] {
	case 'e':
		table = []string{"icate", "ic", "ative", "", "alize", "al"}
	case 'i':
		table = []string{"iciti", "ic"}
	case 'l':
		table = []string{"ical", "ic", "ful", ""}
	case 's':
		table = []string{"ness", ""}
	}
	p.replaceFirst(table)
}

// replaceFirst applies r to the first suffix of table (pairs of suffix and
// replacement) that the word ends with.
func (p *porter) replaceFirst(table []string) {
	for i := 0; i+1 < len(table); i += 2 {
		if p.ends(table[i]) {
			p.r(table[i+1])
			return
		}
	}
}

// step4 removes -ant, -ence and similar in context <c>vcvc<v>.
func (p *porter) step4() {
	if p.k < 1 {
		return
	}
	var suffixes []string
	switch p.b[p.k-1] {
	case 'a':
		suffixes = []string{"al"}
	case 'c':
		suffixes = []string{"ance", "ence"}
	case 'e':
		suffixes = []string{"er"}
	case 'i':
		suffixes = []string{"ic"}
	case 'l':
		suffixes = []string{"able", "ible"}
	case 'n':
		suffixes = []string{"ant", "ement", "ment", "ent"}
	case 'o':
		if p.ends("ion") && p.j >= 0 && (p.b[p.j] == 's' || p.b[p.j] == 't') {
			break
		}
		suffixes = []string{"ou"}
	case 's':
		suffixes = []string{"ism"}
	case 't':
		suffixes = []string{"ate", "iti"}
	case 'u':
		suffixes = []string{"ous"}
	case 'v':
		suffixes = []string{"ive"}
	case 'z':
		suffixes = []string{"ize"}
	default:
		return
	}
	matched := suffixes == nil // the -ion case matched above
	for _, s := range suffixes {
		if p.ends(s) {
			matched = true
			break
		}
	}
	if matched && p.m() > 1 {
		p.k = p.j
	}
}

// step5 removes a final -e and turns -ll into -l when the measure allows.
func (p *porter) step5() {
	p.j = p.k
	if p.b[p.k] == 'e' {
		a := p.m()
		if a > 1 || (a == 1 && !p.cvc(p.k-1)) {
			p.k--
		}
	}
	if p.b[p.k] == 'l' && p.doubleC(p.k) && p.m() > 1 {
		p.k--
	}
}
