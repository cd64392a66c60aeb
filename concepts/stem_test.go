package concepts

import "testing"

// TestStemIsPorter2 pins the stemmer to English Snowball (Porter2) as this
// package uses it, on words from the Snowball sample vocabulary and from
// mail, so a change of module or mode shows.
func TestStemIsPorter2(t *testing.T) {
	for in, want := range map[string]string{
		"caresses": "caress", "ponies": "poni", "ties": "tie", "cats": "cat",
		"agreed": "agre", "plastered": "plaster", "motoring": "motor", "hopping": "hop",
		"happy": "happi", "relational": "relat", "generalizations": "general",
		"oscillators": "oscil", "connections": "connect", "retries": "retri",
		"migrations": "migrat", "webhooks": "webhook", "consistency": "consist",
		"dying": "die", "news": "news", "skies": "sky",
	} {
		if got := stem(in); got != want {
			t.Errorf("stem(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStopWordsIncludeSnowballAndMail(t *testing.T) {
	for _, w := range []string{"the", "yourselves", "because", "thanks", "handoff", "lgtm", "seconds"} {
		if !isStopWord(w) {
			t.Errorf("%q is not a stop word", w)
		}
	}
	for _, w := range []string{"webhook", "migration", "sqlite", "billing"} {
		if isStopWord(w) {
			t.Errorf("%q is a stop word", w)
		}
	}
}
