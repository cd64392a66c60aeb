package mailroom

import (
	"slices"
	"testing"
)

func TestChangeHubCoalescesAndMerges(t *testing.T) {
	h := NewChangeHub()
	select {
	case <-h.Active():
		t.Fatal("a hub without subscribers is active")
	default:
	}
	<-h.Idle() // closed while nobody subscribes
	s := h.Subscribe()
	<-h.Active() // closed now
	idle := h.Idle()
	select {
	case <-idle:
		t.Fatal("a hub with a subscriber is idle")
	default:
	}
	h.Publish(Change{Identities: []int64{1}})
	h.Publish(Change{Identities: []int64{2, 1}, Roles: []string{"triage"}})
	<-s.C()
	select {
	case <-s.C():
		t.Fatal("a burst signalled twice")
	default:
	}
	c := s.Take()
	if c.All || !slices.Equal(c.Identities, []int64{1, 2}) || !slices.Equal(c.Roles, []string{"triage"}) {
		t.Fatalf("merged change = %+v", c)
	}
	if c := s.Take(); c.All || c.Identities != nil || c.Roles != nil {
		t.Fatalf("second Take = %+v, want nothing pending", c)
	}
	h.Publish(Change{Identities: []int64{3}})
	h.Publish(Change{All: true})
	<-s.C()
	if c := s.Take(); !c.All || c.Identities != nil {
		t.Fatalf("All did not absorb the lists: %+v", c)
	}
	s.Close()
	s.Close()
	if h.Len() != 0 {
		t.Fatalf("Len = %d after Close", h.Len())
	}
	select {
	case <-h.Active():
		t.Fatal("hub still active after its last subscriber left")
	default:
	}
	<-idle // the channel taken while subscribed closes when the last one leaves
}

func TestChangeMergeCapsTheTouchedSet(t *testing.T) {
	var c Change
	for i := range 1100 {
		c.Merge(Change{Identities: []int64{int64(i)}})
	}
	if !c.All || c.Identities != nil {
		t.Fatalf("a huge touched set should become All, got %d ids", len(c.Identities))
	}
}

func TestChangeTouches(t *testing.T) {
	cases := []struct {
		name  string
		c     Change
		id    int64
		roles []string
		want  bool
	}{
		{"all touches everyone", Change{All: true}, 7, nil, true},
		{"own identity", Change{Identities: []int64{3, 7}}, 7, nil, true},
		{"someone else", Change{Identities: []int64{3}}, 7, nil, false},
		{"a role held", Change{Roles: []string{"triage"}}, 7, []string{"next-session", "triage"}, true},
		{"a role not held", Change{Roles: []string{"triage"}}, 7, []string{"next-session"}, false},
		{"nothing", Change{}, 7, []string{"triage"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Touches(tc.id, tc.roles); got != tc.want {
				t.Fatalf("Touches = %v, want %v", got, tc.want)
			}
		})
	}
}
