// Package web is mailroom's web inbox for humans, served at / of
// `mailroom serve --http`: server-rendered pages (html/template, so every
// subject and body is escaped), sign-in with a human's bearer token into a
// cookie session, and forms protected twice against cross-site requests (a
// per-session token, and net/http's CrossOriginProtection on Sec-Fetch-Site
// and Origin). New mail appears without a reload: /events streams
// Server-Sent Events fed by the store's change signal, and a small script
// re-fetches the page's mail regions when one arrives.
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailroom/mailroom"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure an Inbox.
type Options struct {
	// MaxBody is the body limit in bytes; 0 means mailroom.DefaultMaxBodySize.
	MaxBody int
	// Sent, if set, is called after each message is stored (it wakes the
	// concept worker) and must not block.
	Sent func()
	// SessionTTL is how long a sign-in lasts; 0 means 12 hours.
	SessionTTL time.Duration
	// KeepAlive is the interval of comments on an idle event stream; 0
	// means 25 seconds.
	KeepAlive time.Duration
	Logger    *slog.Logger
}

// Inbox is the web inbox.
type Inbox struct {
	store    mailroom.Store
	opts     Options
	log      *slog.Logger
	sessions *sessions
	pages    *template.Template
	cop      *http.CrossOriginProtection
	mux      *http.ServeMux
}

const cookieName = "mailroom_session"

// New returns the web inbox on store.
func New(store mailroom.Store, opts Options) *Inbox {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTTL == 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 25 * time.Second
	}
	in := &Inbox{
		store:    store,
		opts:     opts,
		log:      opts.Logger,
		sessions: newSessions(opts.SessionTTL, 10000, time.Now),
		pages:    template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")),
		cop:      http.NewCrossOriginProtection(),
		mux:      http.NewServeMux(),
	}
	in.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	static, _ := fs.Sub(staticFS, "static")
	in.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	in.mux.HandleFunc("GET /{$}", in.signedIn(in.inbox))
	in.mux.HandleFunc("GET /m/{id}", in.signedIn(in.thread))
	in.mux.HandleFunc("GET /events", in.signedIn(in.events))
	in.mux.HandleFunc("POST /signin", in.signin)
	in.mux.HandleFunc("POST /signout", in.form(in.signout))
	in.mux.HandleFunc("POST /send", in.form(in.send))
	in.mux.HandleFunc("POST /read", in.form(in.markRead))
	in.mux.HandleFunc("POST /read-all", in.form(in.markAll))
	in.mux.HandleFunc("POST /archive", in.form(in.archive))
	return in
}

// ServeHTTP serves the inbox's pages, forms and event stream.
func (in *Inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	in.cop.Handler(in.mux).ServeHTTP(w, r)
}

// visitor is a signed-in request: the session and the identity its token
// names now.
type visitor struct {
	sid string
	s   session
	id  mailroom.Identity
}

// visitor returns the request's session, if it is live and its token still
// names a human. Only a page shows the flash: forms, the event stream and
// re-fetches do not take it.
func (in *Inbox) visitor(r *http.Request) (visitor, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return visitor{}, false
	}
	page := r.Method == http.MethodGet && r.URL.Path != "/events" && r.Header.Get("X-Mailroom-Refresh") == ""
	s, ok := in.sessions.get(c.Value, page)
	if !ok {
		return visitor{}, false
	}
	id, err := in.store.IdentityByToken(r.Context(), s.digest)
	if err != nil || id.Kind != mailroom.KindHuman {
		in.sessions.end(c.Value) // revoked, or the store is gone
		return visitor{}, false
	}
	return visitor{sid: c.Value, s: s, id: id}, true
}

func (in *Inbox) signedIn(h func(http.ResponseWriter, *http.Request, visitor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := in.visitor(r)
		if !ok {
			if r.URL.Path == "/events" {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			in.render(w, http.StatusOK, "signin", page{Title: "Sign in"})
			return
		}
		h(w, r.WithContext(mailroom.WithCaller(r.Context(), v.id)), v)
	}
}

// form wraps a POST handler: a signed-in session whose CSRF token the form
// carries. (CrossOriginProtection has already refused cross-origin posts.)
func (in *Inbox) form(h func(http.ResponseWriter, *http.Request, visitor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		v, ok := in.visitor(r)
		if !ok {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		if !sameToken(r.PostForm.Get("csrf"), v.s.csrf) {
			http.Error(w, "the form's session token does not match: reload the page and try again", http.StatusForbidden)
			return
		}
		h(w, r.WithContext(mailroom.WithCaller(r.Context(), v.id)), v)
	}
}

func (in *Inbox) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	fail := func(msg string) {
		in.render(w, http.StatusUnauthorized, "signin", page{Title: "Sign in", Error: msg})
	}
	if token == "" {
		fail("Enter your token.")
		return
	}
	digest := mailroom.TokenDigest(token)
	id, err := in.store.IdentityByToken(r.Context(), digest)
	switch {
	case mailroom.ErrorCode(err) == mailroom.ENOTFOUND:
		fail("That token is not valid.")
		return
	case err != nil:
		in.log.Error("web sign-in", "err", err)
		fail("The mailbox is not answering; try again.")
		return
	case id.Kind != mailroom.KindHuman:
		fail("That token belongs to an agent (" + id.Address() + "); the web inbox is for humans. Create one with: mailroom token create --human LOGIN")
		return
	}
	sid := in.sessions.create(digest)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(in.opts.SessionTTL.Seconds()),
	})
	in.log.Info("web sign-in", "identity", id.Address())
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (in *Inbox) signout(w http.ResponseWriter, r *http.Request, v visitor) {
	in.sessions.end(v.sid)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// page is what every template gets.
type page struct {
	Title   string
	Me      string
	CSRF    string
	Flash   string
	Error   string
	Status  mailroom.Status
	View    inboxView
	Rows    []mailroom.Row
	Total   int
	AtLeast bool // Total is a lower bound (a search stopped counting)
	More    bool
	Thread  []mailroom.Message
	Reply   *replyForm
	Back    string
}

// inboxView is the inbox's filter, from the query string.
type inboxView struct {
	Box      string // inbox, outbox
	Unread   bool
	Archived bool
	Query    string
	From     string
	Limit    int
}

func (v inboxView) url(change func(*inboxView)) string {
	c := v
	change(&c)
	q := url.Values{}
	if c.Box != "" && c.Box != "inbox" {
		q.Set("box", c.Box)
	}
	if c.Unread {
		q.Set("unread", "1")
	}
	if c.Archived {
		q.Set("archived", "1")
	}
	if c.Query != "" {
		q.Set("q", c.Query)
	}
	if c.From != "" {
		q.Set("from", c.From)
	}
	if c.Limit != 0 && c.Limit != mailroom.DefaultLimit {
		q.Set("limit", strconv.Itoa(c.Limit))
	}
	if len(q) == 0 {
		return "/"
	}
	return "/?" + q.Encode()
}

type replyForm struct {
	To, Subject, InReplyTo string
}

func (in *Inbox) base(r *http.Request, v visitor, title string) page {
	p := page{Title: title, Me: v.id.Address(), CSRF: v.s.csrf, Flash: v.s.flash, Back: r.URL.RequestURI()}
	st, err := in.store.Status(r.Context())
	if err != nil {
		in.log.Error("web status", "identity", v.id.Address(), "err", err)
		p.Error = "Could not count your mail: " + mailroom.ErrorMessage(err)
	}
	p.Status = st
	return p
}

func (in *Inbox) inbox(w http.ResponseWriter, r *http.Request, v visitor) {
	q := r.URL.Query()
	view := inboxView{Box: q.Get("box"), Unread: q.Get("unread") == "1", Archived: q.Get("archived") == "1", Query: q.Get("q"), From: q.Get("from"), Limit: mailroom.DefaultLimit}
	if view.Box != "outbox" {
		view.Box = "inbox"
	}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil {
		view.Limit = n
	}
	p := in.base(r, v, "Inbox")
	if view.Box == "outbox" {
		p.Title = "Sent"
	}
	p.View = view
	limit := view.Limit
	f, err := mailroom.ListInput{Box: view.Box, UnreadOnly: view.Unread, IncludeArchived: view.Archived, Query: view.Query, From: view.From, Limit: &limit}.Filter()
	if err == nil {
		var pg mailroom.Page
		pg, err = in.store.List(r.Context(), f)
		p.Rows, p.Total, p.AtLeast, p.More = pg.Messages, pg.TotalCount, !pg.TotalCountExact, pg.NextOffset != nil
	}
	if err != nil {
		p.Error = mailroom.ErrorMessage(err)
		in.logInternal("web list", v, err)
	}
	in.render(w, http.StatusOK, "inbox", p)
}

// maxThread bounds how many messages of one thread a page shows.
const maxThread = 50

func (in *Inbox) thread(w http.ResponseWriter, r *http.Request, v visitor) {
	id := r.PathValue("id")
	ctx := r.Context()
	first, err := in.store.Get(ctx, id)
	if err != nil {
		in.logInternal("web get", v, err)
		p := in.base(r, v, "Not found")
		p.Error = mailroom.ErrorMessage(err)
		in.render(w, http.StatusNotFound, "thread", p)
		return
	}
	p := in.base(r, v, first.Subject)
	limit := maxThread
	f, err := mailroom.ListInput{Box: "all", ThreadID: first.ThreadID, IncludeArchived: true, Limit: &limit}.Filter()
	var rows []mailroom.Row
	if err == nil {
		var pg mailroom.Page
		pg, err = in.store.List(ctx, f)
		rows = pg.Messages
	}
	if err != nil {
		p.Error = mailroom.ErrorMessage(err)
		in.logInternal("web thread", v, err)
	}
	slices.Reverse(rows) // oldest first, as a conversation reads
	for _, row := range rows {
		m, err := in.store.Get(ctx, row.MessageID)
		if err != nil {
			continue // gone since the listing
		}
		p.Thread = append(p.Thread, m)
	}
	if len(p.Thread) == 0 {
		p.Thread = []mailroom.Message{first}
	}
	last := p.Thread[len(p.Thread)-1]
	to := last.From
	if to == v.id.Address() { // replying to one's own message: to its recipients
		to = strings.Join(last.To, ", ")
	}
	subject := last.Subject
	if !strings.HasPrefix(strings.ToLower(subject), "re:") {
		subject = "Re: " + subject
	}
	if n := []rune(subject); len(n) > mailroom.MaxSubjectLen {
		subject = string(n[:mailroom.MaxSubjectLen])
	}
	p.Reply = &replyForm{To: to, Subject: subject, InReplyTo: last.MessageID}
	in.render(w, http.StatusOK, "thread", p)
}

// back is where a form returns to: a local path from the form, else /.
func back(r *http.Request) string {
	b := r.PostForm.Get("back")
	if !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") || strings.HasPrefix(b, "/\\") {
		return "/"
	}
	return b
}

func (in *Inbox) done(w http.ResponseWriter, r *http.Request, v visitor, to, flash string) {
	in.sessions.setFlash(v.sid, flash)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (in *Inbox) failed(w http.ResponseWriter, r *http.Request, v visitor, what string, err error) {
	in.logInternal(what, v, err)
	in.done(w, r, v, back(r), "Not done: "+mailroom.ErrorMessage(err))
}

func (in *Inbox) logInternal(what string, v visitor, err error) {
	if mailroom.ErrorCode(err) == mailroom.EINTERNAL {
		in.log.Error(what, "identity", v.id.Address(), "err", err)
	}
}

// splitAddresses reads a To field: addresses separated by commas or spaces.
func splitAddresses(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\n' || r == '\t' || r == '\r' })
}

func (in *Inbox) send(w http.ResponseWriter, r *http.Request, v visitor) {
	f := r.PostForm
	sin := mailroom.SendInput{
		To:        splitAddresses(f.Get("to")),
		Subject:   strings.TrimSpace(f.Get("subject")),
		Body:      strings.ReplaceAll(f.Get("body"), "\r\n", "\n"),
		Priority:  f.Get("priority"),
		InReplyTo: f.Get("inReplyTo"),
	}
	d, err := sin.Draft(in.opts.MaxBody)
	if err != nil {
		in.failed(w, r, v, "web send", err)
		return
	}
	d.OriginSessionID = "SESSION:web-" + v.id.Name
	rec, err := in.store.Send(r.Context(), d)
	if err != nil {
		in.failed(w, r, v, "web send", err)
		return
	}
	if in.opts.Sent != nil {
		in.opts.Sent()
	}
	in.log.Info("web send", "identity", v.id.Address(), "message", rec.MessageID, "recipients", rec.RecipientCount)
	to := back(r)
	if sin.InReplyTo != "" {
		to = "/m/" + url.PathEscape(rec.MessageID)
	}
	in.done(w, r, v, to, fmt.Sprintf("Sent to %d recipient%s.", rec.RecipientCount, plural(rec.RecipientCount)))
}

func (in *Inbox) markRead(w http.ResponseWriter, r *http.Request, v visitor) {
	id := r.PostForm.Get("id")
	if err := mailroom.ValidateMessageID("id", id); err != nil {
		in.failed(w, r, v, "web mark read", err)
		return
	}
	res := in.store.MarkRead(r.Context(), []string{id})[0]
	if res.Err != nil {
		in.failed(w, r, v, "web mark read", res.Err)
		return
	}
	in.done(w, r, v, back(r), "Marked read.")
}

func (in *Inbox) markAll(w http.ResponseWriter, r *http.Request, v visitor) {
	through := r.PostForm.Get("through")
	if through != "" {
		if err := mailroom.ValidateMessageID("through", through); err != nil {
			in.failed(w, r, v, "web mark all", err)
			return
		}
	}
	d, err := in.store.MarkAllRead(r.Context(), through, r.PostForm.Get("includeRoles") == "1")
	if err != nil {
		in.failed(w, r, v, "web mark all", err)
		return
	}
	msg := fmt.Sprintf("Marked %d message%s read.", d.ReadCount, plural(d.ReadCount))
	if d.WithheldRoleCount > 0 {
		msg += fmt.Sprintf(" %d role-queue message%s left for the role.", d.WithheldRoleCount, plural(d.WithheldRoleCount))
	}
	if d.FailureCount > 0 {
		msg += fmt.Sprintf(" %d could not be marked.", d.FailureCount)
	}
	in.done(w, r, v, back(r), msg)
}

func (in *Inbox) archive(w http.ResponseWriter, r *http.Request, v visitor) {
	id := r.PostForm.Get("id")
	if err := mailroom.ValidateMessageID("id", id); err != nil {
		in.failed(w, r, v, "web archive", err)
		return
	}
	if _, err := in.store.Archive(r.Context(), id); err != nil {
		in.failed(w, r, v, "web archive", err)
		return
	}
	in.done(w, r, v, back(r), "Archived.")
}

// events streams one "inbox" event each time the change signal may have
// touched the visitor's mailbox, with the unread count as data. The page's
// script then re-fetches what it shows.
func (in *Inbox) events(w http.ResponseWriter, r *http.Request, v visitor) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ctx := r.Context()
	sub := in.store.Subscribe()
	defer sub.Close()
	// The stream outlives any per-request write deadline the server sets.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n: connected\n\n")
	fl.Flush()
	roles := in.roles(ctx)
	keep := time.NewTicker(in.opts.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-sub.C():
			if !sub.Take().Touches(v.id.ID, roles) {
				continue
			}
			// A token revoked since the stream opened ends it.
			if _, ok := in.visitor(r); !ok {
				return
			}
			roles = in.roles(ctx)
			st, err := in.store.Status(ctx)
			if errors.Is(err, context.Canceled) {
				return
			}
			if _, err := fmt.Fprintf(w, "event: inbox\ndata: {\"unread\":%d}\n\n", st.Unread.Total); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// roles are the roles the visitor holds, for Change.Touches.
func (in *Inbox) roles(ctx context.Context) []string {
	st, err := in.store.Status(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range st.Roles {
		out = append(out, strings.TrimPrefix(r.Role, "role:"))
	}
	return out
}

func (in *Inbox) render(w http.ResponseWriter, code int, name string, p page) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	var b strings.Builder
	if err := in.pages.ExecuteTemplate(&b, name, p); err != nil {
		in.log.Error("web template", "page", name, "err", err)
		http.Error(w, "page failed", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(code)
	w.Write([]byte(b.String()))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

var funcs = template.FuncMap{
	"when": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04")
	},
	"sent":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
	"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"join":   strings.Join,
	"path":   url.PathEscape,
	"unread": func(r mailroom.Row) bool { return r.ReadAt == nil },
	"mine":   func(me string, r mailroom.Row) bool { return r.From == me },
	"url": func(v inboxView, key string, val any) string {
		return v.url(func(c *inboxView) {
			switch key {
			case "box":
				*c = inboxView{Box: val.(string)}
			case "unread":
				c.Unread = val.(bool)
			case "archived":
				c.Archived = val.(bool)
			case "limit":
				c.Limit = val.(int)
			}
		})
	},
	"add": func(a, b int) int { return a + b },
}
