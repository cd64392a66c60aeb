package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeOllama speaks Ollama's /api/chat and counts requests per subject.
type fakeOllama struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
	hang  chan struct{} // when not nil, requests block until it closes
}

var subjectRE = regexp.MustCompile(`Subject: (\S+)`)

func newFakeOllama(t *testing.T, hang bool) *fakeOllama {
	f := &fakeOllama{calls: map[string]int{}}
	if hang {
		f.hang = make(chan struct{})
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/api/chat" || json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		subject := ""
		if m := subjectRE.FindStringSubmatch(req.Messages[len(req.Messages)-1].Content); m != nil {
			subject = m[1]
		}
		f.mu.Lock()
		f.calls[subject]++
		f.mu.Unlock()
		if f.hang != nil {
			select {
			case <-f.hang:
			case <-r.Context().Done():
			}
			return
		}
		content, _ := json.Marshal(map[string]any{"concepts": []string{"topic " + subject}})
		json.NewEncoder(w).Encode(map[string]any{
			"model": "gemma3", "created_at": time.Now().UTC().Format(time.RFC3339Nano),
			"message": map[string]any{"role": "assistant", "content": string(content)}, "done": true,
		})
	}))
	t.Cleanup(func() {
		if f.hang != nil {
			close(f.hang)
		}
		f.Close()
	})
	return f
}

func (f *fakeOllama) count(subject string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[subject]
}

type concept struct{ ID, Name string }

func (s *session) concepts(id string) []concept {
	s.t.Helper()
	var m struct {
		TaggedConcepts []concept `json:"taggedConcepts"`
	}
	s.ok("get_message", map[string]any{"messageId": id}, &m)
	return m.TaggedConcepts
}

// waitConcepts waits until every message has extractor concepts.
func waitConcepts(t *testing.T, s *session, ids []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for len(s.concepts(id)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no concepts on %s after 30 s\nstderr: %s", id, s.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Two server processes on one database both work the queue; every message
// is extracted exactly once and tagged from the model's answer.
func TestTwoProcessesExtractEachMessageOnce(t *testing.T) {
	t.Parallel()
	ollama := newFakeOllama(t, false)
	env := environ(t)
	db := testDB(t)
	mustRunCLI(t, env, "identity", "add", "carol", "--db", db)
	flags := []string{"--db", db, "--concepts", "ollama", "--ollama-url", ollama.URL, "--concept-model", "gemma3:test"}
	alice := stdio(t, env, "alice", append(flags, "--agent", "alice")...)
	bob := stdio(t, env, "bob", append(flags, "--agent", "bob")...)
	carol := stdio(t, env, "carol", "--db", db, "--agent", "carol", "--concepts", "off")

	const n = 40
	var ids []string
	for i := range n {
		from := []*session{alice, bob}[i%2]
		ids = append(ids, from.send("@carol", fmt.Sprintf("msg-%02d", i)).MessageID)
	}
	waitConcepts(t, carol, ids)
	for i, id := range ids {
		subject := fmt.Sprintf("msg-%02d", i)
		if c := ollama.count(subject); c != 1 {
			t.Errorf("%s was extracted %d times", subject, c)
		}
		if cs := carol.concepts(id); len(cs) != 1 || cs[0].ID != "CONCEPT:topic-"+subject {
			t.Errorf("%s: concepts %v", subject, cs)
		}
	}
}

// A process that queued jobs and exited loses nothing: the next process to
// start works them. A process killed mid-extraction loses nothing either:
// its lease runs out and another process finishes the job.
func TestConceptQueueSurvivesRestart(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	mustRunCLI(t, env, "identity", "add", "bob", "--db", db)

	// 1. Queued by a process that does no extraction, then closed.
	quiet := stdio(t, env, "alice-quiet", "--db", db, "--agent", "alice", "--concepts", "off")
	queued := quiet.send("@bob", "wal-checkpoint").MessageID
	if cs := quiet.concepts(queued); len(cs) != 0 {
		t.Fatalf("concepts without an extractor: %v", cs)
	}
	quiet.cs.Close()

	// 2. Claimed by a process whose model hangs, which is then killed.
	hanging := newFakeOllama(t, true)
	cmd := exec.Command(bin, "serve", "--db", db, "--agent", "alice", "--concepts", "ollama",
		"--ollama-url", hanging.URL, "--concept-lease", "1s")
	cmd.Env = env
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "doomed", Version: "v0"}, nil).
		Connect(context.Background(), &gomcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	doomed := &session{t: t, cs: cs, name: "doomed", stderr: stderr}
	midJob := doomed.send("@bob", "mid-job").MessageID
	deadline := time.Now().Add(10 * time.Second)
	for hanging.count("wal-checkpoint")+hanging.count("mid-job") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the doomed process never claimed a job\nstderr: %s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill() // no shutdown: the job stays leased to a dead worker
	cs.Close()

	// 3. A new process with the embedded extractor finishes both.
	bob := stdio(t, env, "bob", "--db", db, "--agent", "bob")
	waitConcepts(t, bob, []string{queued, midJob})
	t.Logf("after restart: %v / %v", bob.concepts(queued), bob.concepts(midJob))
}
