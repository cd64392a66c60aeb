package concepts

import "strings"

// stopWords are mailroom's own words that carry no topic, on top of the
// Snowball English stop list (see isStopWord): the verbs, adverbs and units
// that fill engineering prose, the forms of verbs, the weakWords, and
// agent-mail boilerplate (greetings, handoff and review framing, status
// words). They break candidate phrases and are never concepts themselves.
// Built once, never mutated.
var stopWords = buildStopWords()

// stopList is the literal part of stopWords.
const stopList = `
e.g i.e eg vs etc cf aka via

zero two three four five six seven eight nine ten eleven twelve twenty hundred thousand
million billion half second third fourth fifth once twice double
ms sec secs seconds minute minutes min mins hour hours hr day days week weeks month months
year years today tomorrow yesterday tonight morning evening night am pm
kb mb gb tb kib mib gib tib

hi hello hey dear thanks thank thx cheers regards best please pls kindly sorry ok okay
yes yeah yep nope sure fine great good nice cool lgtm ptal fyi cc re fw fwd wip tl;dr tldr
handoff hand-off handover hand-over pickup pick-up picking pick picked follow-up followup
note notes noted nb ps summary status update updates updated recap
question questions answer ruling rulings decision decisions decided review reviewed
reviewing incident owner cause mitigation action actions item items todo to-do nit nits
blocking session sessions step steps end started starting finished finish
next previous prior remaining remains left open closed pending asap eod
someone anyone everyone whoever

add adds added adding use uses used using make makes made making need needs needed
needing want wants wanted get gets got getting go goes went gone going give gives gave
given take takes took taken put puts keep keeps kept let lets see sees saw seen look
looks looked looking seem seems seemed think thinks thought know knows knew known say
says said tell tells told ask asks asked try tries tried trying call calls called
come comes came work works worked working run runs ran running set sets setting show
shows showed shown changed changing fix fixes fixed fixing
checked checking find finds found move moves moved write writes wrote written
leave leaves mean means meant become becomes happen happens happened suggest
suggests suggested propose proposes proposed confirm confirmed lean wonder hope guess
feel felt like likes liked prefer would should could can may might must will shall
also just only even still already again instead rather quite really very too
currently right now soon later today then thus hence therefore however otherwise
probably possibly maybe perhaps certainly definitely clearly simply basically
actually exactly mainly mostly fully partly nearly almost around roughly approximately
new old same different other another various several many much more most less least
each every all both either neither few little lot lots bit way thing things stuff
part place kind sort case cases point fact reason reasons problem problems issue issues
something anything everything nothing somewhere anywhere everywhere
true false nil null none err ok todo fixme xxx
`

// genericWords are content words common in any engineering mail. They can be
// part of a concept ("test coverage") but alone say little, so the IDF prior
// treats them as frequent before the mailbox has statistics of its own.
var genericWords = makeSet(`
test tests testing tested code file files line lines message messages error errors
value values name names time times number data system user users change version
server client service request response function method type field list page pages
job jobs run result results output input option options default config setting
team people work task tasks ticket tickets pr prs commit commits branch main fix
support feature features issue thing part place side level size count order orders
problem question case example examples detail details info information idea ideas
call calls path paths step steps process processes start end first last new old
agent agents state context background read reads check checks change changes utc gmt
`)

// makeSet splits a whitespace-separated word list into a set.
func makeSet(words string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// verbs are verbs that rarely head a noun phrase in engineering mail. Their
// inflected forms (see inflect) are stop words: "the index stays small"
// must not yield the concept "index stays".
var verbs = strings.Fields(`
accept affect agree allow answer appear apply arrive assume avoid belong bring
care catch charge choose close collect compare compute confirm consider contain
convert decide delete depend describe discuss drain ensure exist expect explain
fail fall fill follow forget grow hang happen hide hit hold ignore implement
improve include increase inject install introduce lose live mention miss notice
own pass plateau prevent print produce provide push reach realise realize
receive reduce refer reject remember remove rename replace require resolve
restart reuse revisit say share shift sit stall stay steal stop strip suggest
support suspend treat turn understand wait wire wonder wrap
`)

// irregularVerbForms are inflections inflect does not derive.
var irregularVerbForms = strings.Fields(`
brought caught chose chosen fell fallen forgot forgotten grew grown held hid hidden
hung hit lost said sat stole stolen understood spent began begun cut
`)

// weakWords are adjectives and adverbs that qualify rather than name a
// topic ("a simpler fix", "answered slowly"); they are stop words.
var weakWords = strings.Fields(`
able actual amazing annoying awkward bad big cheap cheaper cheapest correct
critical current easier easy entire exact expensive extra fast faster flat forever
good hard harder high higher huge important interesting large larger largest
long longer low lower major minor necessary normal obvious past plain possible
proper quick ready real recent relevant safe safer simple simpler slower small
smaller specific steep strange tiny true unclear usual whole worse worst wrong
`)

// lyAdjectives end in -ly but are adjectives that name things ("nightly
// backup", "monthly subscriptions"), unlike the adverbs the -ly rule drops.
var lyAdjectives = makeSet(`
anomaly apply assembly butterfly daily family fly friendly hourly italy
jelly july monthly nightly only quarterly rely reply supply ugly weekly yearly
early
`)

// isWeakLy reports whether lower is an -ly adverb ("silently"), which
// qualifies rather than names.
func isWeakLy(lower string) bool {
	return len(lower) > 4 && strings.HasSuffix(lower, "ly") && !lyAdjectives[lower]
}

// inflect returns base with its third-person, past and -ing forms, by the
// regular rules of English spelling.
func inflect(base string) []string {
	n := len(base)
	last := base[n-1]
	isVowel := func(c byte) bool { return strings.IndexByte("aeiou", c) >= 0 }
	s, ed, ing := base+"s", base+"ed", base+"ing"
	switch {
	case strings.HasSuffix(base, "s") || strings.HasSuffix(base, "x") || strings.HasSuffix(base, "z") ||
		strings.HasSuffix(base, "ch") || strings.HasSuffix(base, "sh"):
		s = base + "es"
	case last == 'y' && n > 1 && !isVowel(base[n-2]):
		s, ed = base[:n-1]+"ies", base[:n-1]+"ied"
	}
	switch {
	case strings.HasSuffix(base, "ie"):
		ed, ing = base+"d", base[:n-2]+"ying"
	case last == 'e' && !strings.HasSuffix(base, "ee"):
		ed, ing = base+"d", base[:n-1]+"ing"
	case n <= 4 && n >= 3 && !isVowel(last) && strings.IndexByte("wxy", last) < 0 &&
		isVowel(base[n-2]) && !isVowel(base[n-3]):
		ed, ing = base+string(last)+"ed", base+string(last)+"ing"
	}
	return []string{base, s, ed, ing}
}

// buildStopWords assembles stopWords.
func buildStopWords() map[string]bool {
	m := makeSet(stopList)
	for _, v := range verbs {
		for _, f := range inflect(v) {
			m[f] = true
		}
	}
	for _, w := range irregularVerbForms {
		m[w] = true
	}
	for _, w := range weakWords {
		m[w] = true
	}
	return m
}
