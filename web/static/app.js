// mailroom web inbox: live arrival of mail. The server sends an "inbox"
// event on /events whenever the change signal may have touched this
// mailbox; the page then re-fetches itself and swaps in the regions that
// show mail, leaving anything being typed alone. Without this script every
// page still works; it only needs a reload.
(function () {
  "use strict";
  if (!window.EventSource || !document.getElementById("mail")) return;
  var live = document.getElementById("live");
  var busy = false, again = false;

  function swap(doc, id) {
    var fresh = doc.getElementById(id), old = document.getElementById(id);
    if (fresh && old) old.replaceWith(fresh);
  }

  function refresh(unread) {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.pathname + location.search, { credentials: "same-origin", headers: { "Accept": "text/html", "X-Mailroom-Refresh": "1" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var focused = document.activeElement && document.activeElement.closest && document.activeElement.closest("#mail");
        swap(doc, "mail");
        swap(doc, "unread-count");
        if (focused) document.getElementById("mail").setAttribute("tabindex", "-1");
        if (live && typeof unread === "number") live.textContent = "New mail: " + unread + " unread";
        document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
      })
      .catch(function () {})
      .then(function () { busy = false; if (again) { again = false; refresh(); } });
  }

  var es = new EventSource("/events");
  es.addEventListener("open", function () { document.body.dataset.live = "connected"; });
  es.addEventListener("error", function () { document.body.dataset.live = "reconnecting"; });
  es.addEventListener("inbox", function (e) {
    var unread;
    try { unread = JSON.parse(e.data).unread; } catch (_) {}
    refresh(unread);
  });
})();
