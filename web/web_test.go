package web_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/web"
)

type fixture struct {
	t      *testing.T
	store  *sqlite.Store
	srv    *httptest.Server
	alice  mailroom.Identity
	dana   string // dana's token
	agentT string // alice's token
}

func newFixture(t *testing.T) *fixture {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{t: t, store: s}
	f.alice, _ = s.EnsureAgent(ctx, "alice")
	dana, _ := s.AddIdentity(ctx, "dana", mailroom.KindHuman)
	var digest []byte
	f.dana, digest = mailroom.NewToken()
	s.AddToken(ctx, dana.ID, digest)
	f.agentT, digest = mailroom.NewToken()
	s.AddToken(ctx, f.alice.ID, digest)
	f.srv = httptest.NewServer(web.New(s, web.Options{KeepAlive: time.Hour}))
	t.Cleanup(f.srv.Close)
	return f
}

// browser is a client with a cookie jar that does not follow redirects.
func (f *fixture) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) post(c *http.Client, path string, form url.Values, header map[string]string) (*http.Response, string) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (f *fixture) get(c *http.Client, path string) (*http.Response, string) {
	f.t.Helper()
	resp, err := c.Get(f.srv.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs dana in and returns her browser and the page's CSRF token.
func (f *fixture) signIn() (*http.Client, string) {
	c := f.browser()
	resp, _ := f.post(c, "/signin", url.Values{"token": {f.dana}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	_, page := f.get(c, "/")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		f.t.Fatalf("no CSRF token on the inbox page:\n%s", page)
	}
	return c, m[1]
}

func (f *fixture) danaInbox() []mailroom.Row {
	f.t.Helper()
	ctx := mailroom.WithCaller(context.Background(), f.alice)
	lf, _ := mailroom.ListInput{Box: "inbox"}.Filter()
	p, err := f.store.List(ctx, lf)
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Messages
}

func TestSignIn(t *testing.T) {
	f := newFixture(t)
	c := f.browser()
	if resp, page := f.get(c, "/"); resp.StatusCode != 200 || !strings.Contains(page, `<label for="token">Token</label>`) {
		t.Fatalf("signed-out /: %d\n%s", resp.StatusCode, page)
	}
	for _, tc := range []struct{ token, want string }{
		{"", "Enter your token."},
		{"mr_bogus", "That token is not valid."},
		{f.agentT, "That token belongs to an agent (@alice)"},
	} {
		resp, page := f.post(c, "/signin", url.Values{"token": {tc.token}}, nil)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, tc.want) || len(resp.Cookies()) != 0 {
			t.Errorf("sign-in with %q: %d, cookies %v, page lacks %q", tc.token, resp.StatusCode, resp.Cookies(), tc.want)
		}
	}
	resp, _ := f.post(c, "/signin", url.Values{"token": {f.dana}}, nil)
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("sign-in: %d %v", resp.StatusCode, cookies)
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || strings.Contains(ck.Value, f.dana) {
		t.Errorf("session cookie %+v", ck)
	}
	if _, page := f.get(c, "/"); !strings.Contains(page, "Signed in as <strong>human:dana</strong>") {
		t.Errorf("signed-in page:\n%s", page)
	}
}

func TestFormsRefuseForgedRequests(t *testing.T) {
	f := newFixture(t)
	c, csrf := f.signIn()
	form := func(token string) url.Values {
		return url.Values{"csrf": {token}, "to": {"@alice"}, "subject": {"hello"}, "body": {"b"}}
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		header map[string]string
	}{
		{"no session token", url.Values{"to": {"@alice"}, "subject": {"x"}, "body": {"b"}}, nil},
		{"a wrong session token", form("guess"), nil},
		{"a cross-site request", form(csrf), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"a same-site request from another origin", form(csrf), map[string]string{"Sec-Fetch-Site": "same-site"}},
		{"another Origin", form(csrf), map[string]string{"Origin": "http://evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := f.post(c, "/send", tc.form, tc.header)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("status %d, want 403", resp.StatusCode)
			}
			if n := len(f.danaInbox()); n != 0 {
				t.Errorf("a forged post sent %d message(s)", n)
			}
		})
	}
	resp, _ := f.post(c, "/send", form(csrf), map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": f.srv.URL})
	if resp.StatusCode != http.StatusSeeOther || len(f.danaInbox()) != 1 || f.danaInbox()[0].From != "human:dana" {
		t.Fatalf("a genuine post: %d, alice has %+v", resp.StatusCode, f.danaInbox())
	}
	// A form's return path never leaves the site.
	resp, _ = f.post(c, "/read-all", url.Values{"csrf": {csrf}, "back": {"//evil.example/x"}}, nil)
	if loc := resp.Header.Get("Location"); loc != "/" {
		t.Errorf("back=//evil.example redirected to %q", loc)
	}
}

func TestMessageTextIsEscaped(t *testing.T) {
	f := newFixture(t)
	ctx := mailroom.WithCaller(context.Background(), f.alice)
	d, _ := mailroom.SendInput{To: []string{"human:dana"}, Subject: `<img src=x onerror=alert(1)>`, Body: `</pre><script>alert(2)</script>`}.Draft(0)
	d.OriginSessionID = "SESSION:t"
	r, err := f.store.Send(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := f.signIn()
	for _, path := range []string{"/", "/m/" + url.PathEscape(r.MessageID)} {
		resp, page := f.get(c, path)
		if strings.Contains(page, "<img src=x") || strings.Contains(page, "<script>alert") {
			t.Errorf("%s shows message text as HTML:\n%s", path, page)
		}
		if !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s lacks the escaped subject", path)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s CSP %q", path, csp)
		}
	}
	if resp, page := f.get(c, "/m/MESSAGE:nope"); resp.StatusCode != 404 || !strings.Contains(page, "Message not found: MESSAGE:nope") {
		t.Errorf("unknown message: %d", resp.StatusCode)
	}
}

func TestEventsStreamNewMail(t *testing.T) {
	f := newFixture(t)
	c, _ := f.signIn()
	if resp, _ := f.get(f.browser(), "/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("events without a session: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && lines.Text() != ": connected" {
	}
	d, _ := mailroom.SendInput{To: []string{"human:dana"}, Subject: "ping", Body: "b"}.Draft(0)
	d.OriginSessionID = "SESSION:t"
	if _, err := f.store.Send(mailroom.WithCaller(ctx, f.alice), d); err != nil {
		t.Fatal(err)
	}
	// A change signal may be spurious (it says something may have
	// changed); the event after the send carries the new unread count.
	var got []string
	for lines.Scan() {
		if lines.Text() == "" {
			continue
		}
		got = append(got, lines.Text())
		if lines.Text() == `data: {"unread":1}` {
			break
		}
	}
	if n := len(got); n < 2 || got[n-2] != "event: inbox" || got[n-1] != `data: {"unread":1}` {
		t.Errorf("stream after a send: %q (err %v)", got, lines.Err())
	}
}
