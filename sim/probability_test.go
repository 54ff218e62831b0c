package sim

import (
	"math/rand/v2"
	"testing"
)

// A rule with a probability applies to about that share of the requests it
// matches, and the same draws give the same choices.
func TestRuleProbability(t *testing.T) {
	sc, err := ParseScript([]byte(`
rules:
  - {when: {contains: refund}, probability: 0.2, reply: {text: "claimed it without doing it"}}
  - {when: {contains: refund}, reply: {text: "did it"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Script: sc})
	c := &Conversation{Turns: []Turn{{Role: "user", Text: "please refund"}}}
	count := func(seed uint64) int {
		rng := rand.New(rand.NewPCG(seed, 1))
		n := 0
		for range 10000 {
			if rep, _ := s.choose(c, "", rng, true); rep.text == "claimed it without doing it" {
				n++
			}
		}
		return n
	}
	n := count(1)
	if n < 1800 || n > 2200 {
		t.Errorf("rule applied %d times in 10000; want about 2000", n)
	}
	if again := count(1); again != n {
		t.Errorf("same seed gave %d then %d", n, again)
	}
	if _, err := ParseScript([]byte("rules: [{reply: {text: x}, probability: 1.5}]")); err == nil {
		t.Error("probability 1.5 accepted")
	}
}
