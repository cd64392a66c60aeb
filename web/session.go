package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// session is one signed-in browser. It keeps the digest of the token it
// signed in with, not the identity: every request looks the token up again,
// so a revoked token ends its web sessions at once.
type session struct {
	digest  []byte
	csrf    string
	expires time.Time
	flash   string // one notice shown on the next page
}

// sessions are the web inbox's sessions, in this process's memory: a
// restart signs everyone out, and each server instance has its own.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	max int
	now func() time.Time
}

func newSessions(ttl time.Duration, max int, now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, ttl: ttl, max: max, now: now}
}

func randomID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for a token digest and returns its id.
func (s *sessions) create(digest []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) >= s.max {
		for id, x := range s.m {
			if now.After(x.expires) {
				delete(s.m, id)
			}
		}
	}
	if len(s.m) >= s.max { // still full: the oldest goes
		var oldest string
		for id, x := range s.m {
			if oldest == "" || x.expires.Before(s.m[oldest].expires) {
				oldest = id
			}
		}
		delete(s.m, oldest)
	}
	id := randomID()
	s.m[id] = &session{digest: digest, csrf: randomID(), expires: now.Add(s.ttl)}
	return id
}

// get returns a copy of the live session id names; takeFlash hands its
// flash to this request alone.
func (s *sessions) get(id string, takeFlash bool) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[id]
	if !ok {
		return session{}, false
	}
	if s.now().After(x.expires) {
		delete(s.m, id)
		return session{}, false
	}
	out := *x
	if takeFlash {
		x.flash = ""
	}
	return out, true
}

func (s *sessions) setFlash(id, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.m[id]; ok {
		x.flash = msg
	}
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

func sameToken(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
